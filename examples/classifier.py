"""A small classifier trained with cross-entropy on the reference engine, written as in torch.

Three Gaussian blobs in the plane, a two-layer network, log-softmax cross-entropy
(``gather`` picks each sample's log-probability), plain SGD; only module
functions and methods. ``python examples/classifier.py`` (from any directory)
prints the loss and accuracy; ``--graph FILE.svg`` also draws the graph of one
loss (``.svg``, ``.png`` or ``.pdf``, with Graphviz's ``dot``; without it the
picture is skipped with a note). The README's picture is made with
``python examples/classifier.py --graph examples/classifier_graph.svg``.
"""
import reference_engine as engine

engine.manual_seed(0)
n, classes = 96, 3
labels = engine.tensor([i % classes for i in range(n)])      # int64 class of each point
centers = engine.tensor([[0.0, 3.0], [-3.0, -2.0], [3.0, -2.0]], dtype=engine.float64)
points = centers[labels] + engine.randn(n, 2, dtype=engine.float64)

w1 = (engine.randn(2, 16, dtype=engine.float64) * 0.5).requires_grad_()
b1 = engine.zeros(16, dtype=engine.float64, requires_grad=True)
w2 = (engine.randn(16, classes, dtype=engine.float64) * 0.5).requires_grad_()
b2 = engine.zeros(classes, dtype=engine.float64, requires_grad=True)
params = {"w1": w1, "b1": b1, "w2": w2, "b2": b2}


def model(x):
    return engine.tanh(x @ w1 + b1) @ w2 + b2


def cross_entropy(logits, target):
    """Mean negative log-likelihood of the target classes."""
    return -engine.log_softmax(logits, 1).gather(1, target.unsqueeze(1)).mean()


def train(steps=60, lr=0.5):
    losses = []
    for _ in range(steps):
        loss = cross_entropy(model(points), labels)
        loss.backward()
        with engine.no_grad():
            for p in params.values():
                p -= lr * p.grad
                p.grad = None
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Train the classifier; optionally draw one loss's graph.")
    parser.add_argument("--graph", metavar="FILE", help="write the graph of one loss (.svg, .png or .pdf)")
    args = parser.parse_args()
    losses = train()
    accuracy = (model(points).argmax(1) == labels).sum().item() / n
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, accuracy {accuracy:.0%}")
    if args.graph:
        loss = cross_entropy(model(points), labels)
        try:
            print(f"graph of one loss: {engine.render(loss, args.graph, 'loss', params=params)}")
        except RuntimeError as error:       # no Graphviz: the training still counts
            print(f"graph skipped: {error}", file=sys.stderr)
