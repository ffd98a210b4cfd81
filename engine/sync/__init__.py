"""Sync: a store follows its owner between machines through git remotes the owner picks (docs/sync.md).

    remotes.py    the remotes of each store: add, list and remove (``<store>/sync/remotes.json``), the
                  URL and name rules (no credential is ever kept), and the ``operator/*SyncRemote*``
                  methods the command line and the window call
    transport.py  git by URL: other machines' branches of the store fetched into a quarantine
                  (``<store>/sync/fetched.git``), checked as untrusted input (rewritten history, another
                  store, paths, symlinks, submodules, sizes) and only then delivered into the vault's
                  repository; this machine's branch pushed fast-forward only; ``machine.json``, ``tips.json``
    merge.py      two machines' vault states merged by record, never by text: ids united, corrections and
                  withdrawals kept, a page revised on both kept twice with one current by a rule every
                  machine computes the same, removals and conflicts listed; pure, no disk or git
"""
