#!/usr/bin/env bash
# The main job on the embedded defaults: distil an SWE model from the packaged all-MiniLM-L6-v2 teacher
# on the embedded dictionary corpus (WordNet + GCIDE) with small settings, then show what it does.
# Without that corpus (no apt-get), the corpus-free token method is used instead.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
S=.venv/bin/staticsem
MODEL=${MODEL:-models/demo}
if .venv/bin/python -c "import sys; from staticsem.distillation.corpus.embedded import available; sys.exit(not available())"; then
    $S distill --out "$MODEL" --corpus embedded --vocab-size 10000 --sentences-per-word 5 --pca-sentences 30000 \
        --kd-max-steps 3000
else
    echo "The embedded corpus (Debian's wordnet-base and dict-gcide) is not installed: the corpus-free token method instead."
    $S distill --method token --out "$MODEL"
fi
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
