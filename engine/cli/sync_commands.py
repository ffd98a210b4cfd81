"""``knowledge sync``: the git remotes each store syncs with (``remote add / list / remove``), a round now
(``now``), every store's sync status (``status``), a conflict the owner has read (``dismiss``) and a store
cloned from a remote (``clone``); docs/sync.md.

They are on the desk (desk.py): beside a serving engine they ask it as the operator
(``operator/addSyncRemote``, ``operator/syncNow``...), otherwise they do the work here.  A plain path is
made absolute here, where the owner typed it (the engine's working directory differs).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..core.words import counted, for_count
from ..importers.common import DEFAULT_AGENT
from ..state.statedir import StateDir
from ..sync.remotes import is_plain_path
from ..sync.status import conflict_kind_words
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
    add.set_defaults(handler=cmd_sync_remote_add, reads_state=True)

    listing = actions.add_parser("list", parents=[common], help="every store's remotes")
    listing.add_argument("--json", action="store_true", help="print every store's remotes as JSON")
    listing.set_defaults(handler=cmd_sync_remote_list)

    remove = actions.add_parser("remove", parents=[common], help="remove a remote from a store (the remote "
                                                                 "repository itself is left as it is)")
    remove.add_argument("name", metavar="NAME", help="the remote to remove")
    store_choice(remove)
    remove.add_argument("--json", action="store_true", help="print the store's remotes as JSON")
    remove.set_defaults(handler=cmd_sync_remote_remove, reads_state=True)

    now = sync_commands.add_parser(
        "now", parents=[common], help="sync now: fetch, merge by record and push, with each remote",
        description="Runs a round with each remote of the chosen store (--agent or --store), or of every store "
                    "that has remotes: fetches the other machines' branches, merges them record by record into "
                    "the vault, and pushes this machine's branch (fast-forward only, never forced). Exits 1 when "
                    "a remote failed; its error says why.")
    store_choice(now, "every store with remotes")
    now.add_argument("--remote", metavar="NAME", help="only this remote")
    now.add_argument("--json", action="store_true", help="print each remote's status as JSON")
    now.set_defaults(handler=cmd_sync_now, reads_state=True)

    status = sync_commands.add_parser("status", parents=[common], help="every store's sync state, and the "
                                                                      "conflicts waiting with their diff")
    status.add_argument("--json", action="store_true", help="print every store's sync status as JSON")
    status.set_defaults(handler=cmd_sync_status)

    dismiss = sync_commands.add_parser(
        "dismiss", parents=[common], help="take a sync conflict off the list of those waiting, once read",
        description="Takes a conflict that `knowledge sync status` lists off the list of those waiting. The "
                    "revision that stands stays, and the other stays in the record's history and in git: to make "
                    "it current, revise the record.")
    dismiss.add_argument("id", metavar="ID", help="the conflict's id (sc_..., as `knowledge sync status` lists it)")
    store_choice(dismiss)
    dismiss.add_argument("--json", action="store_true", help="print the conflict dismissed as JSON")
    dismiss.set_defaults(handler=cmd_sync_dismiss, reads_state=True)

    clone = sync_commands.add_parser(
        "clone", parents=[common], help="join a store that syncs through a remote, as an agent's store",
        description="Creates this machine's copy of the store the remote holds (the only one, or --store-id): "
                    "the same store id, the agent's own store here (the agent is added if new, its token kept "
                    "in tokens/), the remote recorded, the vault filled from the remote and indexed. Refused when "
                    "the agent already has a store.")
    clone.add_argument("url", metavar="URL", help="where the remote repository is")
    clone.add_argument("--agent", required=True, help="the agent whose store the clone becomes")
    clone.add_argument("--store-id", help="the store to clone when the remote holds several")
    clone.add_argument("--name", help="the remote's name here (default: origin)")
    clone.add_argument("--owner", action="store_true",
                       help="add the agent with owner authority (your own agent on a second machine: it reads the "
                            "private partition)")
    clone.add_argument("--json", action="store_true", help="print the clone as JSON")
    clone.set_defaults(handler=cmd_sync_clone)


def store_choice(parser: argparse.ArgumentParser, default: str = DEFAULT_AGENT) -> None:
    """--agent or --store: which store a command means (neither: ``default``)."""
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--agent", help=f"the agent whose store it is (default: {default})")
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


def cmd_sync_now(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        answer = desk.sync_now(args.store, args.agent, args.remote)
    if args.json:
        print(json.dumps(answer, indent=2, ensure_ascii=False))
    else:
        lines = []
        for store in answer["stores"]:
            lines.append(store["storeId"])
            if store.get("problem"):
                lines.append(f"    {store['problem']}")
            lines.extend(line for remote in store["remotes"] for line in _remote_lines(remote))
            if store.get("conflictsWaiting"):
                lines.append(f"    {counted(store['conflictsWaiting'], 'conflict')} waiting (knowledge sync status "
                             "shows them with their diff)")
        print("\n".join(lines) or answer.get("note", ""))
    return 1 if answer["failing"] else 0


def cmd_sync_status(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        status = desk.sync_status()
    if args.json:
        print(json.dumps(status, indent=2, ensure_ascii=False))
        return 0
    lines = []
    for store in status["stores"]:
        machine = f"  (this machine: {store['machineId']})" if store["machineId"] else ""
        lines.append(f"{store['storeId']}  {store['name'] or 'isolated store'}{machine}")
        if store.get("problem"):
            lines.append(f"    {store['problem']}")
        lines.extend(line for remote in store["remotes"] for line in _remote_lines(remote))
        if not store["remotes"]:
            lines.append("    no remotes (knowledge sync remote add NAME URL)")
        if store["conflictsWaiting"]:
            lines.append(f"    {counted(store['conflictsWaiting'], 'conflict')} waiting:")
        for conflict in store["conflicts"]:
            other = conflict["other"]
            lines.append(f"      conflict {conflict['id']}: {conflict['recordId'] or conflict['standing']['path']} "
                         f"({conflict_kind_words(conflict['kind'])}, from {conflict['remote']} at {conflict['at']}): "
                         f"{conflict['standing']['path']} stands"
                         + (f" over {other['path']}" if other else "; the other side removed it"))
            lines.extend("        " + line for line in conflict["diff"].splitlines())
        if store.get("removed"):
            lines.append("    removed here because another machine removed them (newest first; git and the "
                         "record's history keep them):")
        for removal in store.get("removed", []):
            lines.append(f"      {removal['partition']}/{removal['path']} ({removal['recordId'] or 'no record'}) "
                         f"{removal['detail']} at {removal['at']}")
    print("\n".join(lines) or "No stores yet; each agent's store is created on its first use.")
    return 0


def cmd_sync_dismiss(args: argparse.Namespace, state: StateDir) -> int:
    with open_desk(state) as desk:
        dismissed = desk.dismiss_sync_conflict(args.id, args.store, args.agent)
    _show(dismissed, args.json, f"Dismissed conflict {dismissed['id']} of store {dismissed['storeId']} (at "
                                f"{dismissed['dismissedAt']}); {dismissed['conflictsWaiting']} still waiting. The "
                                "standing revision stays; the other is in the record's history and in git.")
    return 0


def _remote_lines(remote: dict[str, Any]) -> list[str]:
    counts = ""
    if remote["ahead"] is not None or remote["behind"] is not None:
        counts = f", ahead {_count(remote['ahead'])}, behind {_count(remote['behind'])}"
    lines = [f"    {remote['name']:<16} {remote['state']}{counts}  {remote['url']}",
             f"        last success: {remote['lastSuccess'] or 'never'}"]
    error = remote["lastError"]
    if error is not None and remote["state"] == "failing":
        lines.append(f"        last error ({error['code']}, {error['at']}): {error['message']}")
    if remote["machines"]:
        names = remote.get("machineNames") or {}
        said = [f"{names[machine]} ({machine})" if machine in names else machine for machine in remote["machines"]]
        lines.append(f"        other machines: {', '.join(said)}")
    return lines


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def cmd_sync_clone(args: argparse.Namespace, state: StateDir) -> int:
    url = os.path.abspath(args.url) if is_plain_path(args.url) else args.url
    with open_desk(state) as desk:
        cloned = desk.sync_clone(url, args.agent, args.store_id, args.name, args.owner)
    if args.json:
        print(json.dumps(cloned, indent=2, ensure_ascii=False))
    else:
        lines = [f"Cloned store {cloned['storeId']} for agent {cloned['agent']} (this machine: "
                 f"{cloned['machineId']}); {counted(cloned['records'], 'record')} "
                 f"{for_count(cloned['records'], 'is', 'are')} current."]
        if "tokenFile" in cloned:
            authority = " with owner authority" if cloned["owner"] else ""
            lines.append(f"Agent {cloned['agent']} was added here{authority}; its token is in {cloned['tokenFile']}.")
        if not cloned["owner"]:
            lines.append(f"Agent {cloned['agent']} has no owner authority here: it reads its conversations, not the "
                         "private partition (your own agent: clone with --owner).")
        lines.extend(_remote_lines(cloned["remote"]))
        print("\n".join(lines))
    return 1 if cloned["remote"]["state"] == "failing" else 0
