// Preloaded into server-everything (node --require) so it binds 127.0.0.1 only: its transports call
// app.listen(PORT), which would listen on every interface. A listen() given a port and no host
// gets host 127.0.0.1 added.
"use strict";
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const first = args[0];
  const isPort = typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first));
  if (isPort && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  } else if (first && typeof first === "object" && !Array.isArray(first) && first.path === undefined && first.host === undefined) {
    args[0] = { ...first, host: "127.0.0.1" };
  }
  return listen.apply(this, args);
};
