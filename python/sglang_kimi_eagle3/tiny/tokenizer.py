"""A byte-level tokenizer for the tiny target, written as plain JSON (no tokenizers import).

ids 0-2 are <pad>/<s>/</s>; ids 3-258 the 256 bytes (GPT-2 byte-to-unicode alphabet, no merges, so any
text encodes one token per byte); every other id up to vocab_size is a filler token `<tNNNN>` that
decodes to its own name. Enough for SGLang to start with a tokenizer and for the text-based bench to
run against the tiny server; the live test itself sends token ids.
"""

from __future__ import annotations

from .spec import TinySpec

NAMES = ("<pad>", "<s>", "</s>")


def _byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode, in byte order (what tokenizers' ByteLevel pre-tokenizer emits)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def tokenizer_json(s: TinySpec) -> dict:
    vocab = {name: i for i, name in enumerate(NAMES)}
    for b, ch in enumerate(_byte_alphabet()):
        vocab[ch] = len(NAMES) + b
    for i in range(len(vocab), s.vocab_size):
        vocab[f"<t{i}>"] = i
    added = [{"id": i, "content": name, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, name in enumerate(NAMES)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def tokenizer_config() -> dict:
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": NAMES[1], "eos_token": NAMES[2],
            "pad_token": NAMES[0], "add_bos_token": False, "add_eos_token": False, "model_max_length": 1 << 20,
            "clean_up_tokenization_spaces": False}
