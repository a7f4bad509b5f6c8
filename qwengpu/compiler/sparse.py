"""The sparse form of a compiled weight matrix: a compiled model is >99.8% zeros, so the compiler
keeps a matrix as its non-zero (row, column, value) triples when it builds for the compact engine
(`compile_program(..., dense=False)`), and the engines read them (`qwengpu.engines`)."""
from __future__ import annotations

import torch


class SparseMatrix:
    """A matrix as (row, column, value) triples; y = W x by one gather and one scatter-add."""

    def __init__(self, w: torch.Tensor):
        w = w.detach()
        rows, cols = torch.nonzero(w, as_tuple=True)
        vals = w[rows, cols]
        self.shape = tuple(w.shape)
        self.rows, self.cols, self.vals = rows.long(), cols.long(), vals.float()

    @property
    def nnz(self) -> int:
        return int(self.vals.numel())

    def row(self, i: int) -> torch.Tensor:
        out = torch.zeros(self.shape[1])
        m = self.rows == i
        out[self.cols[m]] = self.vals[m]
        return out

    def __matmul__(self, x: torch.Tensor) -> torch.Tensor:
        """W x for a vector x, or (W X^T)^T for positions X [T, in] -> [T, out]."""
        if x.dim() == 1:
            return torch.zeros(self.shape[0]).index_add_(0, self.rows, self.vals * x[self.cols])
        return torch.zeros(x.shape[0], self.shape[0]).index_add_(1, self.rows, x[:, self.cols] * self.vals)
