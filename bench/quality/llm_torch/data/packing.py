"""Sequence packing: concatenate tokenized documents into fixed windows, separated by EOS."""

from collections.abc import Iterable, Iterator

import numpy as np
import torch

EOS_ID = 2


def pack_documents(docs: Iterable[list[int]], seq_len: int, eos_id: int = EOS_ID) -> Iterator[np.ndarray]:
    """Windows of seq_len + 1 tokens; a document may straddle two windows (no padding wasted)."""
    buffer: list[int] = []
    for doc in docs:
        buffer.extend(doc)
        buffer.append(eos_id)
        while len(buffer) >= seq_len + 1:
            yield np.asarray(buffer[: seq_len + 1], dtype=np.int32)
            buffer = buffer[seq_len:]


def document_mask(window: np.ndarray, eos_id: int = EOS_ID) -> torch.Tensor:
    """Block-diagonal causal mask so tokens do not attend across document boundaries."""
    doc_ids = np.cumsum(window[:-1] == eos_id)
    doc_ids = np.concatenate([[0], doc_ids[:-1]])
    same_doc = doc_ids[:, None] == doc_ids[None, :]
    causal = np.tril(np.ones((len(doc_ids), len(doc_ids)), dtype=bool))
    return torch.from_numpy(same_doc & causal)


class PackedDataset(torch.utils.data.IterableDataset):
    def __init__(self, shards: list[str], seq_len: int, use_doc_mask: bool = False):
        self.shards = shards
        self.seq_len = seq_len
        self.use_doc_mask = use_doc_mask

    def _docs(self) -> Iterator[list[int]]:
        for shard in self.shards:
            data = np.load(shard, mmap_mode="r")
            offsets = np.flatnonzero(data == EOS_ID)
            start = 0
            for end in offsets:
                yield data[start:end].tolist()
                start = end + 1

    def __iter__(self):
        for window in pack_documents(self._docs(), self.seq_len):
            tokens = torch.from_numpy(window[:-1].astype(np.int64))
            targets = torch.from_numpy(window[1:].astype(np.int64))
            if self.use_doc_mask:
                yield tokens, targets, document_mask(window)
            else:
                yield tokens, targets
