"""The socket: JSON-RPC 2.0 and MCP framing, the agent tools and their schemas, the stdio MCP
bridge, MCP's Streamable HTTP and the owner's operator connection.

    messages       the one parsing boundary: depth, surrogates, ids
    protocol       Dispatcher: sessions, routing, the one exception-to-wire mapping
    modern         MCP 2026-07-28 beside the handshake revisions: the envelope, result shape, server/discover
    listen         subscriptions/listen: a 2026-07-28 connection's stream of change notifications
    server         EngineServer: loopback TCP and the POSIX socket, bounded before initialize
    tools          the tools as tools/list publishes and tools/call calls them, gathered from their features
    host_methods   the memory/* host methods, gathered from their features
    tool_list      notifications/tools/list_changed: what decides an agent's list, and its watch
    mcp_features   registers MCP's resources, prompts, completions and resource subscriptions:
      resources       records as resources: URIs, templates, list and read
      resource_watch  resources/subscribe: notifications/resources/updated and list_changed
      prompts         the memory prompt and the Knowledge Index as MCP prompts
      completions     completion/complete: record names and aliases as they are typed
    protocol_docs  docs/protocol-tools.md, generated
    bridge         knowledge mcp: stdio <-> socket
    http           knowledge serve --http: MCP's Streamable HTTP over the same dispatcher, on loopback
    http_listen    subscriptions/listen over HTTP: the listen POST's response is the stream
    operator_client  the owner's side of an operator connection (the window and the CLI)
"""
