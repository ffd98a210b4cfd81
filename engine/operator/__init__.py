"""The owner's desk on the socket: operator/* methods the desktop calls (browsing records,
previews, gate tuning, models), and the model manager.

    methods          every operator/* method as its feature declares it (operator_methods); the operator token
    browse           recent, browse, record pages, backlinks for the desktop
    gate_operator    gate settings, replay, labelling, thresholds from labels
    model_operator   model catalogue, pull, verify, choose
    model_benchmark  tokens/s of a Decision model at the gate's pair sizes
    partitions       each store's partitions (figures only, never a conversation's records) and grants
    doctor           the doctor report: stores, diagnostics, config problems
    client_config    ready MCP client configurations for an agent as registered (agents config, Connect an agent)
"""
