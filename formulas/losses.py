"""Loss functions: the regression losses (``mse_loss``, ``l1_loss``, ``smooth_l1_loss``,
``huber_loss``), the binary cross-entropies and ``nll_loss_forward`` with its fused backward
``nll_loss_backward``.

Losses take torch's ``reduction`` enum as its numbers (the emitter has no module constants):
0 none, 1 mean, 2 sum. A pointwise loss's gradient is the incoming gradient (divided by the
element count for mean) times the elementwise derivative. Weights that torch refuses to
differentiate (``weight``, ``pos_weight``) get their true gradient.
"""
from __future__ import annotations

from formulas import Tensor, at, derivative, helper
from formulas.helpers import sum_to


@helper
def loss_scale(grad: Tensor, reduction: int, numel: int) -> Tensor:
    """What multiplies each element's derivative: ``grad``, divided by the element count for mean."""
    if reduction == 1:
        return at.div(grad, numel)
    return grad


@helper
def apply_loss_reduction(elements: Tensor, reduction: int) -> Tensor:
    """``elements`` reduced as the loss is: kept (none), averaged (mean) or summed (sum)."""
    if reduction == 1:
        return at.div(at.sum(elements), elements.numel())
    if reduction == 2:
        return at.sum(elements)
    return elements


@helper
def sign_of(x: Tensor) -> Tensor:
    """``sign(x)`` (0 at 0) in ``x``'s dtype: it carries no gradient."""
    return at.sign(x)


@helper
def clip_derivative(diff: Tensor, bound: float, slope: float) -> Tensor:
    """``slope * diff`` where ``|diff| < bound``, else ``slope * bound * sign(diff)``: the derivative
    of the quadratic-then-linear losses (Huber: slope 1; smooth L1: slope 1 / beta)."""
    # hardtanh clips to [-bound, bound] with slope 1 strictly inside, 0 at the bounds and beyond
    clipped = at.hardtanh(diff, -bound, bound)
    return clipped if slope == 1.0 else at.mul(clipped, slope)


@derivative("mse_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor")
def mse_loss(self, target, reduction=1):
    result = at.mse_loss(self, target, reduction)
    self_sizes = self.sizes()
    target_sizes = target.sizes()
    def backward(grad, *, needs_input_grad):
        # d (x - t)^2 = 2 (x - t) (dx - dt)
        diff = self - target
        grad_diff = loss_scale(grad, reduction, diff.numel()) * diff * 2.0
        grad_self = sum_to(grad_diff, self_sizes) if needs_input_grad[0] else None
        grad_target = sum_to(-grad_diff, target_sizes) if needs_input_grad[1] else None
        return grad_self, grad_target
    def jvp(self_t, target_t):
        result_t = apply_loss_reduction((self - target) * (self_t - target_t) * 2.0, reduction)
        return result_t
    return result, backward


@derivative("l1_loss(Tensor self, Tensor target, int reduction=Mean) -> Tensor")
def l1_loss(self, target, reduction=1):
    result = at.l1_loss(self, target, reduction)
    self_sizes = self.sizes()
    target_sizes = target.sizes()
    def backward(grad, *, needs_input_grad):
        # d |x - t| = sign(x - t) (dx - dt), 0 at a tie as torch
        diff = self - target
        grad_diff = loss_scale(grad, reduction, diff.numel()) * sign_of(diff)
        grad_self = sum_to(grad_diff, self_sizes) if needs_input_grad[0] else None
        grad_target = sum_to(-grad_diff, target_sizes) if needs_input_grad[1] else None
        return grad_self, grad_target
    def jvp(self_t, target_t):
        result_t = apply_loss_reduction(sign_of(self - target) * (self_t - target_t), reduction)
        return result_t
    return result, backward


@derivative("smooth_l1_loss(Tensor self, Tensor target, int reduction=Mean, float beta=1.0) -> Tensor")
def smooth_l1_loss(self, target, reduction=1, beta=1.0):
    result = at.smooth_l1_loss(self, target, reduction, beta)
    self_sizes = self.sizes()
    target_sizes = target.sizes()
    def backward(grad, *, needs_input_grad):
        # loss = d^2 / (2 beta) for |d| < beta, else |d| - beta / 2; beta 0 is the L1 loss
        diff = self - target
        scale = loss_scale(grad, reduction, diff.numel())
        if beta > 0.0:
            # 1 / beta scales grad, not diff: one full-size kernel less where grad is the reduced 0-d one
            grad_diff = clip_derivative(diff, beta, 1.0) * at.div(scale, beta)
            grad_self = sum_to(grad_diff, self_sizes) if needs_input_grad[0] else None
            grad_target = sum_to(-grad_diff, target_sizes) if needs_input_grad[1] else None
        else:
            # the L1 loss; at its kink d = 0 torch's kernel takes the left derivative -1 for self, and
            # for target too (its target gradient is the same kernel with self and target swapped)
            kink = at._to_copy(at.eq(diff, 0.0), dtype=diff.scalar_type())   # torch subtracts no bools
            grad_self = sum_to(scale * (sign_of(diff) - kink), self_sizes) if needs_input_grad[0] else None
            grad_target = sum_to(-scale * (sign_of(diff) + kink), target_sizes) if needs_input_grad[1] else None
        return grad_self, grad_target
    def jvp(self_t, target_t):
        diff = self - target
        slope = sign_of(diff)
        if beta > 0.0:
            slope = clip_derivative(diff, beta, 1.0 / beta)
        result_t = apply_loss_reduction(slope * (self_t - target_t), reduction)
        return result_t
    return result, backward


@derivative("huber_loss(Tensor self, Tensor target, int reduction=Mean, float delta=1.0) -> Tensor")
def huber_loss(self, target, reduction=1, delta=1.0):
    result = at.huber_loss(self, target, reduction, delta)
    self_sizes = self.sizes()
    target_sizes = target.sizes()
    def backward(grad, *, needs_input_grad):
        # loss = d^2 / 2 for |d| < delta, else delta (|d| - delta / 2)
        diff = self - target
        grad_diff = loss_scale(grad, reduction, diff.numel()) * clip_derivative(diff, delta, 1.0)
        grad_self = sum_to(grad_diff, self_sizes) if needs_input_grad[0] else None
        grad_target = sum_to(-grad_diff, target_sizes) if needs_input_grad[1] else None
        return grad_self, grad_target
    def jvp(self_t, target_t):
        result_t = apply_loss_reduction(clip_derivative(self - target, delta, 1.0) * (self_t - target_t), reduction)
        return result_t
    return result, backward


@derivative("binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=Mean) -> Tensor")
def binary_cross_entropy(self, target, weight=None, reduction=1):
    result = at.binary_cross_entropy(self, target, weight, reduction)
    self_numel = self.numel()
    def backward(grad, *, needs_input_grad):
        # loss = -w (t log x + (1 - t) log(1 - x)), with log(1 - x) = log(x - x^2) - log x:
        # d/dx = w (x - t) / (x - x^2), d/dt = w (log(1 - x) - log x) = -w logit(x), d/dw = loss / w.
        # At x = 0 or 1 torch's loss clamps its logs at -100 but its gradient is this d/dx with the
        # denominator floored at 1e-12 (0 where x = t, -+1e12 w where x = 1 - t): that is the value taken
        scaled = loss_scale(grad, reduction, self_numel)
        weighted = scaled * weight if weight is not None else scaled
        grad_self = (weighted * (self - target) / at.clamp_min(self - self * self, 1e-12)
                     if needs_input_grad[0] else None)
        grad_target = -(weighted * at.logit(self)) if needs_input_grad[1] else None
        grad_weight = None
        if needs_input_grad[2]:
            log_self = at.log(self)
            log_complement = at.log(self - self * self) - log_self
            unweighted = -(target * log_self + log_complement - target * log_complement)
            grad_weight = sum_to(scaled * unweighted, weight.sizes())
        return grad_self, grad_target, grad_weight
    def jvp(self_t, target_t, weight_t):
        log_self = at.log(self)
        log_complement = at.log(self - self * self) - log_self
        elements = (self - target) / (self - self * self) * self_t + (log_complement - log_self) * target_t
        if weight is not None:
            unweighted = -(target * log_self + log_complement - target * log_complement)
            elements = elements * weight + unweighted * weight_t
        result_t = apply_loss_reduction(elements, reduction)
        return result_t
    return result, backward


@derivative("binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, "
            "Tensor? pos_weight=None, int reduction=Mean) -> Tensor")
def binary_cross_entropy_with_logits(self, target, weight=None, pos_weight=None, reduction=1):
    result = at.binary_cross_entropy_with_logits(self, target, weight, pos_weight, reduction)
    self_numel = self.numel()
    def backward(grad, *, needs_input_grad):
        # loss = -w (p t log s(x) + (1 - t) log s(-x)), s the sigmoid, p = pos_weight (1 if None):
        # d/dx = w (s(x) - t s(x) - p t s(-x)), d/dt = w (log s(-x) - p log s(x)),
        # d/dw = loss / w, d/dp = -w t log s(x)
        # without pos_weight (p = 1) these are s(x) - t and log s(-x) - log s(x) = -x
        scaled = loss_scale(grad, reduction, self_numel)
        weighted = scaled * weight if weight is not None else scaled
        grad_self = None
        if needs_input_grad[0]:
            if pos_weight is None:
                grad_self = weighted * (at.sigmoid(self) - target)
            else:
                positive = at.sigmoid(self)
                grad_self = weighted * (positive - target * positive - target * pos_weight * at.sigmoid(-self))
        grad_target = None
        if needs_input_grad[1]:
            if pos_weight is None:
                grad_target = weighted * -self
            else:
                grad_target = weighted * (at.log(at.sigmoid(-self)) - at.log(at.sigmoid(self)) * pos_weight)
        grad_weight = None
        if needs_input_grad[2]:
            log_positive = at.log(at.sigmoid(self))
            log_negative = at.log(at.sigmoid(-self))
            weighted_target = target * pos_weight if pos_weight is not None else target
            unweighted = -(weighted_target * log_positive + log_negative - target * log_negative)
            grad_weight = sum_to(scaled * unweighted, weight.sizes())
        grad_pos_weight = None
        if needs_input_grad[3]:
            grad_pos_weight = sum_to(-(weighted * target * at.log(at.sigmoid(self))), pos_weight.sizes())
        return grad_self, grad_target, grad_weight, grad_pos_weight
    def jvp(self_t, target_t, weight_t, pos_weight_t):
        positive = at.sigmoid(self)
        negative = at.sigmoid(-self)
        weighted_target = target * pos_weight if pos_weight is not None else target
        elements = (positive - target * positive - weighted_target * negative) * self_t
        if pos_weight is not None:
            elements = elements + (at.log(negative) - at.log(positive) * pos_weight) * target_t
        else:
            elements = elements + (at.log(negative) - at.log(positive)) * target_t
        if pos_weight is not None:
            elements = elements - target * at.log(positive) * pos_weight_t
        if weight is not None:
            unweighted = -(weighted_target * at.log(positive) + at.log(negative) - target * at.log(negative))
            elements = elements * weight + unweighted * weight_t
        result_t = apply_loss_reduction(elements, reduction)
        return result_t
    return result, backward


@derivative("nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) "
            "-> (Tensor output, Tensor total_weight)", output_differentiability=[True, False])
def nll_loss_forward(self, target, weight, reduction, ignore_index):
    output, total_weight = at.nll_loss_forward(self, target, weight, reduction, ignore_index)
    def backward(grad_output, *, needs_input_grad):
        # output = -sum_i w[t_i] self[i, t_i] (divided by total_weight W = sum_i w[t_i] for mean),
        # ignored targets left out: the gradient is scattered to [i, t_i] (fused in ATen)
        divisor = total_weight
        if weight is not None and reduction == 1:
            # W depends on the weight but is a non-differentiable output: recomputed here as
            # -nll_loss(ones, sum), so that second order in the weight sees it
            ones = at.exp(at.new_zeros(self, self.sizes()))
            divisor, ones_total = at.nll_loss_forward(ones, target, weight, 2, ignore_index)
            divisor = -divisor
        grad_self = None
        if needs_input_grad[0]:
            grad_self = at.nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, divisor)
        grad_weight = None
        if needs_input_grad[2]:
            # picked[i, t_i] = -grad_i (unweighted, ignored rows 0): d/dw_c sums picked * self over the
            # rows with t_i = c; for mean, output = S / W gives (dS - output dW) / W
            picked = at.nll_loss_backward(grad_output, self, target, None, 2 if reduction == 1
                                          else reduction, ignore_index, total_weight)
            grad_weight = sum_to(picked * self, weight.sizes())
            if reduction == 1:
                grad_weight = (grad_weight + output * sum_to(picked, weight.sizes())) / divisor
        return grad_self, None, grad_weight
    def jvp(self_t, weight_t):
        # linear in self; in weight, S / W for mean moves by (S_t - output W_t) / W
        output_t, total_t = at.nll_loss_forward(self_t, target, weight, reduction, ignore_index)
        if weight is not None:
            weight_reduction = 2 if reduction == 1 else reduction
            sum_t, weight_total_t = at.nll_loss_forward(self, target, weight_t, weight_reduction, ignore_index)
            if reduction == 1:
                output_t = output_t + (sum_t - output * weight_total_t) / total_weight
            else:
                output_t = output_t + sum_t
        return output_t
    return (output, total_weight), backward


@derivative("nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, "
            "SymInt ignore_index, Tensor total_weight) -> Tensor")
def nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    result = at.nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)
    per_row = grad_output.dim() == 1
    def backward(grad, *, needs_input_grad):
        # result[i, t_i] = -w[t_i] grad_output_i (/ total_weight for mean), 0 elsewhere: result is
        # grad_output (broadcast over the classes) times that pattern, nll_loss_backward of ones;
        # the adjoint sums grad times the pattern over the classes (over everything for a 0-d
        # grad_output); self gives only its shape
        grad_grad_output = None
        if needs_input_grad[0]:
            pattern = at.nll_loss_backward(at.ones_like(grad_output), self, target, weight, reduction, ignore_index,
                                           total_weight)
            if per_row:
                grad_grad_output = at.sum(grad * pattern, [1])
            else:
                grad_grad_output = at.sum(grad * pattern)
        grad_weight = None
        if needs_input_grad[3]:
            picked = at.nll_loss_backward(grad_output, self, target, None, reduction, ignore_index, total_weight)
            grad_weight = sum_to(picked * grad, weight.sizes())
        grad_total_weight = None
        if needs_input_grad[4] and reduction == 1:
            grad_total_weight = -at.sum(result * grad) / total_weight
        return grad_grad_output, None, None, grad_weight, grad_total_weight
    def jvp(grad_output_t, weight_t, total_weight_t):
        # linear in grad_output and in weight (w[t_i] scales each entry); for mean, result moves by
        # -result total_weight_t / total_weight (the backward's gradients of weight and total_weight)
        result_t = at.nll_loss_backward(grad_output_t, self, target, weight, reduction, ignore_index, total_weight)
        if weight is not None:
            result_t = result_t + at.nll_loss_backward(grad_output, self, target, weight_t, reduction, ignore_index,
                                                       total_weight)
        if reduction == 1:
            result_t = result_t - result * (total_weight_t / total_weight)
        return result_t
    return result, backward
