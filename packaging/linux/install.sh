#!/bin/sh
# Installs an unpacked Knowledge Desk bundle for the current user (no root, no Python needed):
#   ~/.local/opt/knowledge-desk/        the bundle
#   ~/.local/bin/knowledge              a link to its executable
#   ~/.local/share/applications/, icons/hicolor/, metainfo/   the desktop entry, icons and AppStream data
# Usage: sh knowledge-desk/install/install.sh [BUNDLE_DIR]   (default: the bundle this script came in)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bundle=${1:-$here/..}
[ -x "$bundle/knowledge" ] || { echo "install.sh: no bundle at $bundle (expected $bundle/knowledge)" >&2; exit 1; }
data=${XDG_DATA_HOME:-$HOME/.local/share}
app_id=dev.knowledgedesk.KnowledgeDesk

mkdir -p "$HOME/.local/opt" "$HOME/.local/bin" "$data/applications" "$data/metainfo"
rm -rf "$HOME/.local/opt/knowledge-desk"
cp -R "$bundle" "$HOME/.local/opt/knowledge-desk"
ln -sf "$HOME/.local/opt/knowledge-desk/knowledge" "$HOME/.local/bin/knowledge"
sed "s|^Exec=knowledge|Exec=$HOME/.local/bin/knowledge|; s|^TryExec=knowledge|TryExec=$HOME/.local/bin/knowledge|" \
    "$here/$app_id.desktop" > "$data/applications/$app_id.desktop"
cp "$here/$app_id.metainfo.xml" "$data/metainfo/"
for size in 16 24 32 48 64 128 256 512; do
    mkdir -p "$data/icons/hicolor/${size}x${size}/apps"
    cp "$here/icons/knowledge-desk-$size.png" "$data/icons/hicolor/${size}x${size}/apps/$app_id.png"
done
mkdir -p "$data/icons/hicolor/scalable/apps"
cp "$here/icons/knowledge-desk.svg" "$data/icons/hicolor/scalable/apps/$app_id.svg"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$data/applications" || true
# knowledge://record/... links (what agents cite) open in the window: `knowledge desktop URL`.
command -v xdg-mime >/dev/null 2>&1 && xdg-mime default "$app_id.desktop" x-scheme-handler/knowledge || true
echo "Installed Knowledge Desk: run 'knowledge desktop' (make sure ~/.local/bin is on PATH) or open it from the menu."
