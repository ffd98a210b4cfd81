"""The state directory and what the owner configures: paths and the engine lock, config.json
(stores, writes, recall gate, models), and registry.sqlite (agents, credentials, stores, grants,
conversation owners).

    statedir       <state>/ layout, engine.json, the one-engine lock
    config         config.json parsed into typed Settings; reloaded when it changes
    registry       registry.sqlite: identities, hashed credentials, bindings, grants, owners
    gate_settings  the recallGate block, checked
"""
