"""Tiny teachers of the families staticsem meets, built without the hub: BERT (mean; CLS with an
instruction prompt; mean without the prompt's tokens, as INSTRUCTOR; one saved with ``truncate_dim``),
XLM-R (SentencePiece Unigram), MPNet, ModernBERT (byte-level BPE, CLS pooling), Qwen3 (a decoder: last-token
pooling, left padding, a default prompt) and Gemma 3 text (Dense modules after the pooling, a default
prompt; bidirectional attention, as EmbeddingGemma, which torch cannot export to ONNX). Random weights, 32
wide and 2 layers; each tokenizer is trained here on ``TEXTS`` and the fake topics with ``tokenizers``' own
trainers, small enough that many words take several tokens. A teacher is built in a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers.processors import TemplateProcessing

from fakes import COMMON, TOPICS

HIDDEN = 32
# what the teachers read: words beside punctuation, quotes, an apostrophe, digits and capitals
TEXTS = [
    "The cat sat on the mat, and the dog barked.",
    '"Music" is what the band plays (loudly) tonight!',
    "The judge's court heard the tax case at the bank.",
    "Fish swim in the lake; rain falls on the water.",
    "A kitten and a puppy played with fur in 2024.",
    "Is the river deep? The boat was on the water.",
    "The song of the guitar, the drum and the band.",
    "A pet dog is a puppy; a pet cat is a kitten.",
]
INSTRUCTION = "Represent this sentence for searching relevant passages: "
QWEN_SPLIT = (  # Qwen's pre-tokenizer: a word may take one character of punctuation before it ("Music)
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)


def _train(tokenizer: Tokenizer, trainer: Any, first: str | None, last: str) -> Tokenizer:
    """``tokenizer`` trained on ``TEXTS`` and the fake topics' words, ``first`` and ``last`` around a text."""
    words = [w for topic in TOPICS for w in topic] + COMMON
    tokenizer.train_from_iterator(
        [*TEXTS, INSTRUCTION, *(" ".join(words[i:] + words[:i]) for i in range(9))], trainer
    )
    tokens = [t for t in (first, last) if t]
    tokenizer.post_processor = TemplateProcessing(
        single=" ".join(t for t in (first, "$A", last) if t),
        special_tokens=[(t, tokenizer.token_to_id(t)) for t in tokens],
    )
    return tokenizer


def wordpiece(pad: str, unk: str, cls: str, sep: str, mask: str) -> tuple[Tokenizer, dict[str, Any]]:
    """BERT's and MPNet's kind: lower-casing WordPiece."""
    tok = Tokenizer(models.WordPiece(unk_token=unk))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.BertPreTokenizer(), decoders.WordPiece()
    _train(
        tok, trainers.WordPieceTrainer(vocab_size=160, special_tokens=[pad, unk, cls, sep, mask]), cls, sep
    )
    names = {"pad_token": pad, "unk_token": unk, "cls_token": cls, "sep_token": sep, "mask_token": mask}
    return tok, {**names, "do_lower_case": True}


def unigram() -> tuple[Tokenizer, dict[str, Any]]:
    """XLM-R's kind: cased SentencePiece Unigram ("▁word"; often a lone "▁" before a word's pieces)."""
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    _train(
        tok,
        trainers.UnigramTrainer(vocab_size=150, special_tokens=specials, unk_token="<unk>"),
        "<s>",
        "</s>",
    )
    names = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "sep_token": "</s>"}
    return tok, {**names, "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>"}


def byte_bpe(size: int, first: str | None, last: str, specials: list[str], split: str | None) -> Tokenizer:
    """Cased byte-level BPE ("Ġword"), GPT-2's pre-split or ``split``'s."""
    tok = Tokenizer(models.BPE())
    level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split is None)
    tok.pre_tokenizer = (
        level
        if split is None
        else pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), "isolated"), level])
    )
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    return _train(
        tok,
        trainers.BpeTrainer(vocab_size=size, special_tokens=specials, initial_alphabet=alphabet),
        first,
        last,
    )


def modernbert_tokenizer() -> tuple[Tokenizer, dict[str, Any]]:
    """ModernBERT's kind: byte-level BPE between [CLS] and [SEP]."""
    tok = byte_bpe(300, "[CLS]", "[SEP]", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], None)
    names = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]"}
    return tok, {**names, "mask_token": "[MASK]"}


def qwen_tokenizer() -> tuple[Tokenizer, dict[str, Any]]:
    """Qwen3's kind: byte-level BPE on Qwen's pre-split, ``<|endoftext|>`` after a text, left padding."""
    tok = byte_bpe(400, None, "<|endoftext|>", ["<|endoftext|>"], QWEN_SPLIT)
    return tok, {"pad_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "padding_side": "left"}


def gemma_tokenizer() -> tuple[Tokenizer, dict[str, Any]]:
    """Gemma's kind: BPE over "▁"-marked words, punctuation not split off, between ``<bos>`` and ``<eos>``."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")
    tok.decoder = decoders.Metaspace(prepend_scheme="never")
    _train(
        tok,
        trainers.BpeTrainer(vocab_size=200, special_tokens=["<pad>", "<eos>", "<bos>", "<unk>"]),
        "<bos>",
        "<eos>",
    )
    return tok, {"pad_token": "<pad>", "eos_token": "<eos>", "bos_token": "<bos>", "unk_token": "<unk>"}


def transformer(kind: str, vocab: int, **config: Any) -> Any:
    """A ``transformers`` model of ``kind`` (``Bert``, ``Qwen3``, ...), ``HIDDEN`` wide, 2 layers."""
    import transformers

    sizes = {"hidden_size": HIDDEN, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
    settings = getattr(transformers, f"{kind}Config")(vocab_size=vocab, **sizes, **config)
    return getattr(transformers, f"{kind}Model")(settings)


ROBERTA_IDS = {"max_position_embeddings": 130, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}
DECODER = {"max_position_embeddings": 128, "num_key_value_heads": 1, "head_dim": 16}


@dataclass(frozen=True)
class Family:
    """How one family's tiny teacher is made, and the ``prompt`` (a name or text) a build passes."""

    name: str
    tokenizer: Callable[[], tuple[Tokenizer, dict[str, Any]]]  # the fast tokenizer, the wrapper's settings
    model: Callable[[int], Any]  # the vocabulary's size → the transformer
    pooling: str = "mean"
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt: str | None = None
    prompt: str | None = None
    dense: tuple[int, ...] = ()  # Dense modules' widths after the pooling
    truncate_dim: int | None = None
    include_prompt: bool = True  # False: the pooling leaves the prompt's tokens out (INSTRUCTOR)

    def prompt_text(self) -> str:
        """The text the teacher puts before every sentence."""
        name = self.prompt or self.default_prompt
        return self.prompts.get(name, name) if name else ""


def _bert_tokenizer() -> tuple[Tokenizer, dict[str, Any]]:
    tok, settings = wordpiece("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    return tok, {**settings, "model_input_names": ["input_ids", "token_type_ids", "attention_mask"]}


def _bert(vocab: int) -> Any:
    return transformer("Bert", vocab, max_position_embeddings=128)


FAMILIES = {
    family.name: family
    for family in (
        Family("bert-mean", _bert_tokenizer, _bert),
        Family("bert-cls-prompt", _bert_tokenizer, _bert, "cls", {"query": INSTRUCTION}, prompt="query"),
        Family(
            "instructor",
            _bert_tokenizer,
            _bert,
            prompts={"query": INSTRUCTION},
            prompt="query",
            include_prompt=False,
        ),
        Family(
            "xlmr-unigram", unigram, lambda v: transformer("XLMRoberta", v, type_vocab_size=1, **ROBERTA_IDS)
        ),
        Family(
            "mpnet",
            lambda: wordpiece("<pad>", "<unk>", "<s>", "</s>", "<mask>"),
            lambda v: transformer("MPNet", v, **ROBERTA_IDS),
        ),
        Family(
            "modernbert",
            modernbert_tokenizer,
            lambda v: transformer(
                "ModernBert",
                v,
                max_position_embeddings=128,
                pad_token_id=0,
                cls_token_id=2,
                sep_token_id=3,
                bos_token_id=2,
                eos_token_id=3,
                global_attn_every_n_layers=2,
                local_attention=8,
            ),
            "cls",
        ),
        Family(
            "qwen3",
            qwen_tokenizer,
            lambda v: transformer("Qwen3", v, pad_token_id=0, eos_token_id=0, **DECODER),
            "lasttoken",
            {"query": "Instruct: Given a query, find its passages\nQuery:", "document": ""},
            default_prompt="query",
        ),
        Family(
            "gemma3-dense",
            gemma_tokenizer,
            lambda v: transformer(
                "Gemma3Text",
                v,
                sliding_window=8,
                use_bidirectional_attention=True,
                pad_token_id=0,
                eos_token_id=1,
                bos_token_id=2,
                **DECODER,
            ),
            prompts={"query": "task: search result | query: "},
            default_prompt="query",
            dense=(48, 24),
        ),
        Family("bert-truncated", _bert_tokenizer, _bert, truncate_dim=16),
    )
}


def build_family(family: Family, folder: Path, seed: int = 0) -> Path:
    """``family``'s tiny teacher as a Sentence Transformer folder, ``folder/teacher``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer
    from transformers import PreTrainedTokenizerFast

    tok, settings = family.tokenizer()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, **{"model_input_names": ["input_ids", "attention_mask"], **settings}
    )
    torch.manual_seed(seed)
    source = folder / "hf"
    family.model(tok.get_vocab_size()).save_pretrained(source)
    tokenizer.save_pretrained(source)
    modules: list[Any] = [
        Transformer(str(source), max_seq_length=64),
        Pooling(HIDDEN, family.pooling, family.include_prompt),
    ]
    for width, out in zip((HIDDEN, *family.dense), family.dense, strict=False):
        modules.append(Dense(width, out))
    teacher = SentenceTransformer(
        modules=[*modules, Normalize()],
        device="cpu",
        prompts=family.prompts or None,
        default_prompt_name=family.default_prompt,
        truncate_dim=family.truncate_dim,
    )
    teacher.save(str(folder / "teacher"))
    return folder / "teacher"
