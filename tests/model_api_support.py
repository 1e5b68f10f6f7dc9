"""A scripted model behind each provider's official Python SDK, for the model-API formats' tests:
the SDK's async client sends its real request to an in-process mock transport (no network), which
records the request body and answers with one tool call, then with a plain reply. What the SDK
sent (the tools, the system text, the tool result in the second request) is what a real provider
would have received."""

from __future__ import annotations

import json
from typing import Any

import httpx

MODEL_URL = "http://model.invalid"


class Scripted:
    """Answers the first request of a conversation with a tool call (``name``, ``arguments``), the
    next with text; ``requests`` holds each request's JSON body."""

    def __init__(self, format: str, name: str, arguments: dict[str, Any]) -> None:
        self.format, self.name, self.arguments = format, name, arguments
        self.requests: list[dict[str, Any]] = []

    def answer(self, body: bytes) -> dict[str, Any]:
        self.requests.append(json.loads(body))
        first = len(self.requests) == 1
        args = json.dumps(self.arguments)
        if self.format == "openai-chat":
            message: dict[str, Any] = {"role": "assistant", "content": None if first else "done"}
            if first:
                message["tool_calls"] = [
                    {"id": "call-1", "type": "function", "function": {"name": self.name, "arguments": args}}
                ]
            return {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls" if first else "stop", "message": message}],
            }
        if self.format == "openai-responses":
            item = (
                {
                    "type": "function_call",
                    "id": "fc-1",
                    "call_id": "call-1",
                    "name": self.name,
                    "arguments": args,
                    "status": "completed",
                }
                if first
                else {
                    "type": "message",
                    "id": "m-1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}],
                }
            )
            return {
                "id": "r",
                "object": "response",
                "created_at": 0,
                "model": "m",
                "status": "completed",
                "output": [item],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        if self.format == "anthropic":
            block = (
                {"type": "tool_use", "id": "call-1", "name": self.name, "input": self.arguments}
                if first
                else {"type": "text", "text": "done"}
            )
            return {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "c",
                "content": [block],
                "stop_reason": "tool_use" if first else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        part = (
            {"functionCall": {"name": self.name, "args": self.arguments, "id": "call-1"}} if first else {"text": "done"}
        )
        return {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]}

    def httpx_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.MockTransport(lambda r: httpx.Response(200, json=self.answer(r.content)))
        )


async def converse(rt: Any, format: str, model: Scripted, *, strict: bool = False) -> dict[str, Any]:
    """One turn with a tool: the SDK sends ``rt``'s tools and instructions, the model calls a
    tool, ``rt.model_call`` runs it and the SDK sends the result back. Returns kxen's result."""
    tools = rt.model_tools(format, strict=strict)
    system = rt.model_instructions() or "You are a test."
    user = {"role": "user", "content": "go"}
    if format in ("openai-chat", "openai-responses"):
        import openai

        client = openai.AsyncOpenAI(
            api_key="test", base_url=f"{MODEL_URL}/v1", http_client=model.httpx_client(), max_retries=0
        )
        if format == "openai-chat":
            messages: list[Any] = [{"role": "system", "content": system}, user]
            reply = await client.chat.completions.create(model="m", messages=messages, tools=tools)
            call = reply.choices[0].message.tool_calls[0]
            result = await rt.model_call(format, call, strict=strict)
            messages += [reply.choices[0].message.model_dump(exclude_none=True), result]
            await client.chat.completions.create(model="m", messages=messages, tools=tools)
            return result
        reply = await client.responses.create(model="m", instructions=system, input="go", tools=tools)
        call = reply.output[0]
        result = await rt.model_call(format, call, strict=strict)
        await client.responses.create(model="m", previous_response_id=reply.id, input=[result], tools=tools)
        return result
    if format == "anthropic":
        import anthropic
        import httpx2

        def handler(request: Any) -> Any:
            return httpx2.Response(200, json=model.answer(request.content))

        client = anthropic.AsyncAnthropic(
            api_key="test",
            base_url=MODEL_URL,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
            max_retries=0,
        )
        reply = await client.messages.create(model="c", max_tokens=64, system=system, messages=[user], tools=tools)
        call = reply.content[0]
        result = await rt.model_call(format, call)
        messages = [user, {"role": "assistant", "content": reply.content}, {"role": "user", "content": [result]}]
        await client.messages.create(model="c", max_tokens=64, system=system, messages=messages, tools=tools)
        return result
    from google import genai
    from google.genai import types

    client = genai.Client(
        api_key="test", http_options=types.HttpOptions(base_url=MODEL_URL, httpx_async_client=model.httpx_client())
    )
    config = types.GenerateContentConfig(
        system_instruction=system, tools=[types.Tool(function_declarations=list(tools))]
    )
    reply = await client.aio.models.generate_content(model="gemini-test", contents="go", config=config)
    call = reply.candidates[0].content.parts[0]
    result = await rt.model_call(format, call)
    contents = [
        types.Content(role="user", parts=[types.Part(text="go")]),
        reply.candidates[0].content,
        types.Content(role="user", parts=[types.Part.model_validate(result)]),
    ]
    await client.aio.models.generate_content(model="gemini-test", contents=contents, config=config)
    return result


def sdk_check(format: str, tool: dict[str, Any]) -> None:
    """``tool`` checked with the SDK's own type for a tool definition of ``format`` (nothing the
    type does not know is dropped without notice: the validated value is the same)."""
    import pydantic

    if format == "gemini":
        from google.genai import types

        types.Tool(function_declarations=[types.FunctionDeclaration.model_validate(tool)])
        return
    if format == "openai-chat":
        from openai.types.chat import ChatCompletionToolParam as kind
    elif format == "openai-responses":
        from openai.types.responses import FunctionToolParam as kind
    else:
        from anthropic.types import ToolParam as kind
    assert pydantic.TypeAdapter(kind).validate_python(tool) == tool


def sdk_check_result(format: str, result: dict[str, Any]) -> None:
    """A tool result checked with the SDK's own type for it."""
    import pydantic

    if format == "gemini":
        from google.genai import types

        types.Part.model_validate(result)
        return
    if format == "openai-chat":
        from openai.types.chat import ChatCompletionToolMessageParam as kind
    elif format == "openai-responses":
        from openai.types.responses.response_input_param import FunctionCallOutput as kind
    else:
        from anthropic.types import ToolResultBlockParam as kind
    assert pydantic.TypeAdapter(kind).validate_python(result) == result
