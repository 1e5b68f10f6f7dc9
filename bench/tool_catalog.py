"""A generated catalog of 10,000 tools for the tool-search benchmark (bench/tool_search.py):
100 servers of 20 kinds of product (code hosting, chat, mail, calendars, payments, ...), each
with ten resources and ten actions on them, named and described the way MCP servers of such
products name theirs. Deterministic: the same seed gives the same catalog, so the labelled
queries of bench/tool_search_queries.json keep naming tools that exist."""

from __future__ import annotations

import random
from typing import Any

#: kind -> (its servers and their product names, its ten resources)
DOMAINS: dict[str, tuple[dict[str, str], list[str]]] = {
    "code": ({"github": "GitHub", "gitlab": "GitLab", "bitbucket": "Bitbucket", "gitea": "Gitea",
              "azure_repos": "Azure Repos"},
             ["repository", "issue", "pull_request", "branch", "commit", "release", "label", "milestone",
              "comment", "workflow_run"]),
    "chat": ({"slack": "Slack", "discord": "Discord", "teams": "Microsoft Teams", "mattermost": "Mattermost",
              "zulip": "Zulip"},
             ["channel", "message", "thread", "user", "reaction", "file", "reminder", "emoji", "webhook", "invite"]),
    "mail": ({"gmail": "Gmail", "outlook_mail": "Outlook Mail", "fastmail": "Fastmail", "protonmail": "Proton Mail",
              "zoho_mail": "Zoho Mail"},
             ["email", "draft", "label", "attachment", "filter", "contact", "thread", "signature", "alias", "folder"]),
    "calendar": ({"google_calendar": "Google Calendar", "outlook_calendar": "Outlook Calendar",
                  "calendly": "Calendly", "fantastical": "Fantastical", "zoho_calendar": "Zoho Calendar"},
                 ["event", "calendar", "attendee", "reminder", "availability", "booking", "room", "invitation",
                  "recurrence", "timezone"]),
    "docs": ({"google_drive": "Google Drive", "dropbox": "Dropbox", "onedrive": "OneDrive", "box": "Box",
              "notion": "Notion"},
             ["file", "folder", "document", "page", "comment", "permission", "share_link", "revision", "template",
              "workspace"]),
    "tickets": ({"jira": "Jira", "linear": "Linear", "asana": "Asana", "trello": "Trello", "clickup": "ClickUp"},
                ["ticket", "project", "sprint", "board", "epic", "comment", "assignee", "status", "label",
                 "attachment"]),
    "crm": ({"salesforce": "Salesforce", "hubspot": "HubSpot", "pipedrive": "Pipedrive", "zoho_crm": "Zoho CRM",
             "close": "Close"},
            ["contact", "lead", "deal", "account", "opportunity", "note", "activity", "pipeline", "owner",
             "campaign"]),
    "payments": ({"stripe": "Stripe", "paypal": "PayPal", "square": "Square", "braintree": "Braintree",
                  "adyen": "Adyen"},
                 ["payment", "refund", "customer", "invoice", "subscription", "payout", "dispute", "coupon", "price",
                  "charge"]),
    "db": ({"postgres": "PostgreSQL", "mysql": "MySQL", "mongodb": "MongoDB", "redis": "Redis", "sqlite": "SQLite"},
           ["table", "row", "query", "index", "schema", "backup", "user", "connection", "migration", "view"]),
    "cloud": ({"aws": "AWS", "gcp": "Google Cloud", "azure": "Azure", "digitalocean": "DigitalOcean",
               "hetzner": "Hetzner Cloud"},
              ["instance", "bucket", "volume", "snapshot", "load_balancer", "dns_record", "firewall_rule", "key_pair",
               "cluster", "region"]),
    "monitoring": ({"datadog": "Datadog", "grafana": "Grafana", "prometheus": "Prometheus", "sentry": "Sentry",
                    "pagerduty": "PagerDuty"},
                   ["alert", "dashboard", "metric", "incident", "monitor", "log", "event", "service",
                    "on_call_schedule", "silence"]),
    "ci": ({"jenkins": "Jenkins", "circleci": "CircleCI", "github_actions": "GitHub Actions",
            "buildkite": "Buildkite", "travis": "Travis CI"},
           ["pipeline", "build", "job", "artifact", "runner", "secret", "environment", "deployment", "test_report",
            "schedule"]),
    "support": ({"zendesk": "Zendesk", "intercom": "Intercom", "freshdesk": "Freshdesk", "helpscout": "Help Scout",
                 "front": "Front"},
                ["ticket", "conversation", "customer", "agent", "macro", "tag", "article", "satisfaction_rating",
                 "group", "view"]),
    "shop": ({"shopify": "Shopify", "woocommerce": "WooCommerce", "bigcommerce": "BigCommerce",
              "magento": "Magento", "etsy": "Etsy"},
             ["product", "order", "customer", "inventory_item", "collection", "discount", "shipment", "review",
              "cart", "variant"]),
    "analytics": ({"google_analytics": "Google Analytics", "mixpanel": "Mixpanel", "amplitude": "Amplitude",
                   "segment": "Segment", "posthog": "PostHog"},
                  ["report", "event", "funnel", "cohort", "user_profile", "dashboard", "property", "experiment",
                   "audience", "annotation"]),
    "social": ({"twitter": "X (Twitter)", "linkedin": "LinkedIn", "facebook": "Facebook", "instagram": "Instagram",
                "mastodon": "Mastodon"},
               ["post", "comment", "follower", "like", "message", "profile", "hashtag", "mention", "media",
                "scheduled_post"]),
    "hr": ({"workday": "Workday", "bamboohr": "BambooHR", "gusto": "Gusto", "rippling": "Rippling",
            "personio": "Personio"},
           ["employee", "time_off_request", "payroll_run", "department", "position", "benefit", "review", "document",
            "timesheet", "candidate"]),
    "accounting": ({"quickbooks": "QuickBooks", "xero": "Xero", "freshbooks": "FreshBooks", "wave": "Wave",
                    "sage": "Sage"},
                   ["invoice", "bill", "expense", "vendor", "account", "journal_entry", "tax_rate", "report",
                    "receipt", "bank_transaction"]),
    "maps": ({"google_maps": "Google Maps", "mapbox": "Mapbox", "here": "HERE", "openstreetmap": "OpenStreetMap",
              "tomtom": "TomTom"},
             ["place", "route", "geocode", "distance", "traffic", "elevation", "timezone", "static_map", "isochrone",
              "address"]),
    "media": ({"youtube": "YouTube", "spotify": "Spotify", "vimeo": "Vimeo", "soundcloud": "SoundCloud",
               "twitch": "Twitch"},
              ["video", "playlist", "track", "channel", "comment", "subscription", "live_stream", "caption", "album",
               "artist"]),
}  # fmt: skip

VERBS = ("list", "get", "create", "update", "delete", "search", "archive", "export", "count", "restore")

PHRASES: dict[str, tuple[str, ...]] = {
    "list": ("List the {plural} in {product}.", "Returns a page of {plural} from {product}.",
             "Lists {plural} of the authenticated {product} account."),
    "get": ("Get one {thing} from {product} by its ID.", "Fetch the details of a {product} {thing}.",
            "Retrieves a single {thing} in {product}."),
    "create": ("Create a new {thing} in {product}.", "Creates a {product} {thing} with the given fields.",
               "Add a {thing} to {product}."),
    "update": ("Update a {thing} in {product}.", "Changes the fields of an existing {product} {thing}.",
               "Modify a {thing} of {product}; only the given fields change."),
    "delete": ("Delete a {thing} from {product}.", "Permanently removes a {product} {thing}.",
               "Deletes the {thing} with the given ID in {product}."),
    "search": ("Search {product} {plural} by text.", "Full-text search over the {plural} of {product}.",
               "Find {plural} in {product} matching a query."),
    "archive": ("Archive a {thing} in {product}; it can be restored later.",
                "Moves a {product} {thing} to the archive.", "Archives the given {thing} of {product}."),
    "export": ("Export {plural} from {product} as CSV or JSON.", "Download the {plural} of {product} as a file.",
               "Exports {product} {plural} for a date range."),
    "count": ("Count the {plural} in {product}.", "Returns how many {plural} {product} holds, optionally filtered.",
              "Number of {product} {plural} matching a filter."),
    "restore": ("Restore an archived or deleted {thing} in {product}.",
                "Brings back a {product} {thing} from the trash.", "Undo the deletion of a {thing} in {product}."),
}  # fmt: skip

EXTRAS = (
    "Requires an API token with the right scopes.",
    "Rate limited by the {product} API.",
    "Results are paginated; pass the cursor of the previous page.",
    "",
    "",
    "Times are in UTC.",
)


def _params(verb: str, thing: str, rng: random.Random) -> dict[str, Any]:
    words = thing.replace("_", " ")
    ident = {f"{thing}_id": {"type": "string", "description": f"the ID of the {words}"}}
    fields = {
        "name": {"type": "string", "description": f"the {words}'s name or title"},
        "description": {"type": "string", "description": "free text"},
    }
    paging = {
        "limit": {"type": "integer", "description": "items per page (at most 100)"},
        "cursor": {"type": "string", "description": "the next page's cursor"},
    }
    by_verb: dict[str, dict[str, Any]] = {
        "list": {**paging, "sort": {"type": "string", "description": "field to sort by"}},
        "get": ident,
        "create": fields,
        "update": {**ident, **fields},
        "delete": ident,
        "search": {"query": {"type": "string", "description": "the words to search for"}, **paging},
        "archive": ident,
        "export": {"format": {"type": "string", "enum": ["csv", "json"]}, "since": {"type": "string"}},
        "count": {"filter": {"type": "string", "description": "a filter expression"}},
        "restore": ident,
    }
    props = dict(by_verb[verb])
    if rng.random() < 0.3:
        props["workspace_id"] = {"type": "string", "description": "the workspace or organization"}
    required = [k for k in props if k.endswith("_id") or k in ("name", "query")]
    return {"type": "object", "properties": props, "required": required}


def generated_catalog(seed: int = 28) -> list[dict[str, Any]]:
    """The 10,000 tools, each as ``Runtime.tools()`` gives one (``server``, ``name``,
    ``qualifiedName``, ``description``, ``inputSchema``, ``policy``)."""
    rng = random.Random(seed)
    out = []
    for servers, resources in DOMAINS.values():
        for server, product in servers.items():
            for thing in resources:
                words = thing.replace("_", " ")
                plural = words[:-1] + "ies" if words.endswith("y") and words[-2] not in "aeiou" else words + "s"
                for verb in VERBS:
                    text = rng.choice(PHRASES[verb]).format(product=product, thing=words, plural=plural)
                    extra = rng.choice(EXTRAS).format(product=product)
                    name = f"{verb}_{thing}"
                    out.append(
                        {
                            "name": name,
                            "description": f"{text} {extra}".strip(),
                            "inputSchema": _params(verb, thing, rng),
                            "server": server,
                            "qualifiedName": f"{server}__{name}",
                            "policy": "ask",
                        }
                    )
    return out


__all__ = ["DOMAINS", "VERBS", "generated_catalog"]
