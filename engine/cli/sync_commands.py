"""``knowledge sync remote add / list / remove``: the git remotes each store syncs with (docs/sync.md).

They are on the desk (desk.py): beside a serving engine they ask it as the operator
(``operator/addSyncRemote``...), otherwise they edit the store's ``sync/remotes.json`` here.  A plain path
is made absolute here, where the owner typed it (the engine's working directory differs).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..importers.common import DEFAULT_AGENT
from ..state.statedir import StateDir
from ..sync.remotes import is_plain_path
from .desk import open_desk


def add_sync_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    sync = commands.add_parser("sync", parents=[common], help="sync stores between machines through git remotes")
    sync_commands = sync.add_subparsers(dest="sync_command", required=True, metavar="ACTION")
    remote = sync_commands.add_parser("remote", parents=[common], help="the git remotes each store syncs with")
    actions = remote.add_subparsers(dest="remote_command", required=True, metavar="ACTION")

    add = actions.add_parser(
        "add", parents=[common], help="add a remote to a store",
        description="Adds a git remote to a store: user@host:path or ssh://, https://, http://, git://, file:// "
                    "or a path. A URL carrying a password, token or query string is refused: git keeps "
                    "credentials itself (ssh-agent, a credential helper). Nothing is fetched or pushed.")
    add.add_argument("name", metavar="NAME", help="the remote's name (letters, digits, '.', '_', '-')")
    add.add_argument("url", metavar="URL", help="where the remote repository is")
    store_choice(add)
    add.add_argument("--json", action="store_true", help="print the store's remotes as JSON")
    add.set_defaults(handler=cmd_sync_remote_add)

    listing = actions.add_parser("list", parents=[common], help="every store's remotes")
    listing.add_argument("--json", action="store_true", help="print every store's remotes as JSON")
    listing.set_defaults(handler=cmd_sync_remote_list)

    remove = actions.add_parser("remove", parents=[common], help="remove a remote from a store (the remote "
                                                                 "repository itself is left as it is)")
    remove.add_argument("name", metavar="NAME", help="the remote to remove")
    store_choice(remove)
    remove.add_argument("--json", action="store_true", help="print the store's remotes as JSON")
    remove.set_defaults(handler=cmd_sync_remote_remove)


def store_choice(parser: argparse.ArgumentParser) -> None:
    """--agent or --store: which store a command means (neither: main's)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--agent", help=f"the agent whose store it is (default: {DEFAULT_AGENT})")
    which.add_argument("--store", help="a named store's name, or a store id (`knowledge stores list`)")


def cmd_sync_remote_add(args: argparse.Namespace, state: StateDir) -> int:
    url = os.path.abspath(args.url) if is_plain_path(args.url) else args.url
    with open_desk(state) as desk:
        changed = desk.add_sync_remote(args.name, url, args.store, args.agent)
    _show(changed, args.json, f"Store {changed['storeId']} now syncs with remote {changed['remote']['name']} at "
                              f"{changed['remote']['url']}. Nothing was fetched or pushed; git keeps the "
                              "credentials (ssh-agent, a credential helper).")
    return 0


def cmd_sync_remote_remove(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        changed = desk.remove_sync_remote(args.name, args.store, args.agent)
    _show(changed, args.json, f"Removed remote {changed['remote']['name']} ({changed['remote']['url']}) from store "
                              f"{changed['storeId']}; the remote repository is left as it is.")
    return 0


def _show(changed: dict[str, Any], as_json: bool, text: str) -> None:
    print(json.dumps(changed, indent=2, ensure_ascii=False) if as_json else text)


def cmd_sync_remote_list(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        listing = desk.sync_remotes()
    if args.json:
        print(json.dumps(listing, indent=2, ensure_ascii=False))
        return 0
    lines = []
    for store in listing["stores"]:
        lines.append(f"{store['storeId']}  {store['name'] or 'isolated store of ' + (store['owner'] or '(nobody)')}")
        if store["problem"]:
            lines.append(f"    {store['problem']}")
        lines.extend(f"    {remote['name']:<16} {remote['url']}  (added {remote['addedAt']})"
                     for remote in store["remotes"])
        if not store["remotes"] and not store["problem"]:
            lines.append("    no remotes (knowledge sync remote add NAME URL)")
    print("\n".join(lines) or "No stores yet; each agent's store is created on its first use.")
    return 0
