"""Who is calling and which partition of which store they reach: credentials, audiences,
grants, conversation owners and every agent's effective store.

    authority  Authorizer: caller + audience -> one partition, or denied
    stores     StoreResolver: isolated and named stores, membership, inventory
"""
