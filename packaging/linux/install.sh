#!/bin/sh
# Install VRAM Planner for the current user: the program under ~/.local/opt, a `vramplan`
# command in ~/.local/bin, and a menu entry with its icon. Run it from the unpacked folder.
# Remove with: rm -rf ~/.local/opt/vramplan ~/.local/bin/vramplan \
#   ~/.local/share/applications/vramplan.desktop ~/.local/share/icons/hicolor/*/apps/vramplan.*
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data=${XDG_DATA_HOME:-$HOME/.local/share}
rm -rf "$HOME/.local/opt/vramplan"
mkdir -p "$HOME/.local/opt" "$HOME/.local/bin" "$data/applications" \
  "$data/icons/hicolor/scalable/apps" "$data/icons/hicolor/256x256/apps"
cp -R "$here/vramplan" "$HOME/.local/opt/vramplan"
ln -sf "$HOME/.local/opt/vramplan/vramplan" "$HOME/.local/bin/vramplan"
cp "$here/vramplan.svg" "$data/icons/hicolor/scalable/apps/vramplan.svg"
cp "$here/vramplan.png" "$data/icons/hicolor/256x256/apps/vramplan.png"
sed "s|^Exec=vramplan|Exec=$HOME/.local/opt/vramplan/vramplan|" "$here/vramplan.desktop" \
  > "$data/applications/vramplan.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database "$data/applications" || true
echo "VRAM Planner installed: run 'vramplan' or pick it from the applications menu."
