#!/usr/bin/env bash
# The main job on the bundled data: describe the samples, then warp the test card by a rotation and
# by a swirl flow field, turn and resize the brain volume, and resample it through an ITK
# transform. Outputs go to $1 (default: out/).
set -euo pipefail
cd "$(dirname "$0")/.."
gridwarp=${GRIDWARP:-build/app/gridwarp}
out=${1:-out}
mkdir -p "$out"

"$gridwarp" info data/card.png
"$gridwarp" info data/brain.nii.gz
"$gridwarp" info data/swirl.flo

"$gridwarp" affine -i data/card.png -o "$out/card_rotated.png" --rotate 30 --scale 0.8 --mode cubic
"$gridwarp" flow -i data/card.png -f data/swirl.flo -o "$out/card_swirled.png" --padding border
"$gridwarp" affine -i data/card.png -o "$out/card_small_reflect.png" --scale 0.5 --padding reflection
"$gridwarp" affine -i data/brain.nii.gz -o "$out/brain_rotated.nii.gz" --rotate 15 --mode cubic
"$gridwarp" resize -i data/brain.nii.gz -o "$out/brain_4mm.nii.gz" --voxel-size 4
"$gridwarp" info "$out/brain_4mm.nii.gz"
"$gridwarp" resize -i data/brain.nii.gz -o "$out/ref3mm.nii.gz" --voxel-size 3
"$gridwarp" resample -i data/brain.nii.gz -r "$out/ref3mm.nii.gz" -t data/tilt.tfm -o "$out/brain_tilted.nii.gz" --mode cubic
"$gridwarp" info "$out/brain_tilted.nii.gz"
echo "demo outputs are in $out/"
