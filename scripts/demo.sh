#!/usr/bin/env bash
# The main job on the embedded defaults: distil a static model from the packaged all-MiniLM-L6-v2
# teacher (no corpus needed), then show what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
S=.venv/bin/staticsem
MODEL=${MODEL:-models/demo}
$S distill --method token --out "$MODEL" --dim 256
$S info "$MODEL"
echo "Sentence similarities (cosine of mean word vectors):"
while IFS='|' read -r a b; do
    printf '  %s  %-38s %-38s\n' "$($S similarity "$MODEL" "$a" "$b")" "$a" "$b"
done <<'PAIRS'
A man is playing a guitar.|A person plays an instrument.
A man is playing a guitar.|The stock market fell sharply today.
The cat sleeps on the sofa.|A kitten naps on the couch.
The cat sleeps on the sofa.|Parliament passed the new budget.
PAIRS
for word in king paris coffee happy; do
    $S neighbors "$MODEL" "$word" -k 5
done
$S analogy "$MODEL" man king woman -k 3
