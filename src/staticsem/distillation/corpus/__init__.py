"""Corpus machinery: reading sources into sentences, prefetching, the embedded corpus, vocabularies,
sentence choice and parallel pairs."""
