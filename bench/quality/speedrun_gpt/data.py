"""FineWeb token shards (GPT-2 tokenizer, uint16) read as one stream, each rank taking its slice."""
import itertools
from pathlib import Path

import torch
from torch import Tensor

SHARD_MAGIC = 20240520
HEADER_INTS = 256


def _load_data_shard(file: Path) -> Tensor:
    header = torch.from_file(str(file), False, HEADER_INTS, dtype=torch.int32)
    assert header[0] == SHARD_MAGIC, "magic number mismatch in the data .bin file"
    assert header[1] == 1, "unsupported version"
    num_tokens = int(header[2])
    with file.open("rb", buffering=0) as f:
        tokens = torch.empty(num_tokens, dtype=torch.uint16, pin_memory=True)
        f.seek(HEADER_INTS * 4)
        nbytes = f.readinto(tokens.numpy())
        assert nbytes == 2 * num_tokens, "number of tokens read does not match header"
    return tokens


def find_batch_starts(tokens: Tensor, pos: int, local_batch_size: int, world_size: int, bos_id: int) -> list[int]:
    """Start every rank's slice on a document boundary, so no rank begins in the middle of a document."""
    boundary = (tokens[pos:] == bos_id).nonzero().squeeze(-1) + pos
    starts, end = [], pos
    for _ in range(world_size):
        following = boundary[boundary >= end]
        assert len(following) > 0, "ran out of documents in this shard"
        start = int(following[0])
        starts.append(start)
        end = start + local_batch_size
    return starts


def distributed_data_generator(filename_pattern: str, batch_size: int, rank: int, world_size: int,
                               bos_id: int = 50256, align_to_bos: bool = True, cycle: bool = False):
    files = sorted(Path.cwd().glob(filename_pattern))
    assert files, f"no shards match {filename_pattern}"
    assert batch_size % world_size == 0
    local_batch_size = batch_size // world_size
    file_iter = itertools.cycle(files) if cycle else iter(files)
    tokens, pos = _load_data_shard(next(file_iter)), 0
    while True:
        if pos + batch_size + 1 >= len(tokens):
            tokens, pos = _load_data_shard(next(file_iter)), 0
        if align_to_bos:
            starts = find_batch_starts(tokens, pos, local_batch_size, world_size, bos_id)
            start = starts[rank]
            pos = starts[-1] + local_batch_size
        else:
            start = pos + rank * local_batch_size
            pos += batch_size
        buf = tokens[start:][:local_batch_size + 1]
        inputs = buf[:-1].to(device="cuda", dtype=torch.int32, non_blocking=True)
        targets = buf[1:].to(device="cuda", dtype=torch.int64, non_blocking=True)
        yield inputs, targets
