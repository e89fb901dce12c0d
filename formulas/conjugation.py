"""Complex conjugation and the real part: ``conj``, ``resolve_conj``, ``real``, ``conj_physical``.

The library is real-valued: on a real tensor each of these is the identity (it returns its
input itself, as torch's does; ``conj_physical`` returns a copy, where torch's returns a real
input itself). They are declared because derivatives.yaml's formulas conjugate
every factor, so that they are right for complex dtypes too. Each is linear over the reals: its backward applies the
op to the gradient (the adjoint of conjugation is conjugation, of taking the real part the
real part), and its jvp applies it to the tangent.
"""
from __future__ import annotations

from formulas import at, derivative, family_member


@derivative("conj(Tensor(a) self) -> Tensor(a)", jvp="auto_linear")
@family_member("resolve_conj(Tensor(a) self) -> Tensor(a)", rename={"conj": "resolve_conj"})
@family_member("real(Tensor(a) self) -> Tensor(a)", rename={"conj": "real"})
def conj(self):
    result = at.conj(self)
    def backward(grad):
        return at.conj(grad)
    return result, backward




@derivative("conj_physical(Tensor self) -> Tensor", jvp="auto_linear")
def conj_physical(self):
    # a new tensor always: torch's returns its real input itself, which a node of its own cannot
    # take as its output (torch's has no node there); values and gradients are torch's
    result = at.clone(at.conj_physical(self))
    def backward(grad):
        return at.conj_physical(grad)
    return result, backward
