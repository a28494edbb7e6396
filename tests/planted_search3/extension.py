"""Planted quantities over a function class (test-only extension, tests/test_function_class.py); none is a real
lemma. Each draws its activation through ctx.activation(), never builds one, so runs and hunts move it over the
claim's declared class. The false claim fails only for members with phi(0) != 0 (shifts the class admits), never
for the default member tanh."""


from lemmacheck.context import Observation
from lemmacheck.registry import QUANTITIES


@QUANTITIES.register("p3-activation-gain", "max_i ||phi(W x_i)|| / ||W x_i|| for Gaussian W (m x d): <= L when "
                     "phi is L-Lipschitz with phi(0) = 0, unbounded near W x = 0 otherwise", networks=("scalar",))
def activation_gain(ctx):
    X = ctx.inputs()  # (R, n, d)
    phi = ctx.activation()
    m = ctx.i("m")
    W = ctx.randn(X.shape[0], m, X.shape[-1]) / X.shape[-1] ** 0.5
    Z = X @ W.transpose(1, 2)  # (R, n, m)
    ratio = phi(Z).norm(dim=-1) / Z.norm(dim=-1)
    return Observation(ratio.amax(-1))


@QUANTITIES.register("p3-descent-ratio", "max_k |phi(u) - phi(v) - phi'(v)(u - v)| / ((u - v)^2 / 2) over k "
                     "Gaussian pairs (u, v): <= beta for a beta-smooth phi, = beta on a quadratic piece",
                     networks=("scalar",))
def descent_ratio(ctx):
    phi = ctx.activation()
    k = ctx.i("k")
    u, v = ctx.randn(ctx.replicates, k), ctx.randn(ctx.replicates, k)
    half = (u - v) ** 2 / 2
    remainder = phi(u) - phi(v) - phi.d1(v) * (u - v)
    ratio = remainder.abs() / half
    best = ratio.argmax(-1, keepdim=True)
    # rounding of the remainder is that of its terms', relative to the denominator
    terms = (phi(u).abs() + phi(v).abs() + (phi.d1(v) * (u - v)).abs()) / half
    return Observation(ratio.gather(-1, best)[:, 0], extras={"scale": terms.gather(-1, best)[:, 0]})


@QUANTITIES.register("p3-loss-floor", "min_k loss(z_k) over k Gaussian margins z: >= 0 for a nonnegative loss, "
                     "negative for a loss the class admits with a negative value (the identity, a shifted softplus)",
                     networks=("scalar",))
def loss_floor(ctx):
    loss = ctx.loss()
    z = 3 * ctx.randn(ctx.replicates, ctx.i("k"))
    return Observation(loss(z).amin(-1))
