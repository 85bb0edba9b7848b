"""Shared helpers of the tests of ``posbias.llm`` (not a test module)."""


class _Tok:
    """A stand-in tokenizer: ids 3..92 from the characters, 0-2 special, vocabulary 100."""
    all_special_ids = [0, 1, 2]

    def __len__(self):
        return 100

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [3 + (ord(c) % 90) for c in text[:5000]]}
