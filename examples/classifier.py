"""A small classifier trained with cross-entropy on the reference engine, written as in torch.

Three Gaussian blobs in the plane, a two-layer network, log-softmax cross-entropy
(``gather`` picks each sample's log-probability), plain SGD; only module
functions and methods. ``python examples/classifier.py`` prints the loss and
accuracy and draws the graph of one loss into ``examples/classifier_graph.svg``.
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
    losses = train()
    accuracy = (model(points).argmax(1) == labels).sum().item() / n
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}, accuracy {accuracy:.0%}")
    loss = cross_entropy(model(points), labels)
    engine.render(loss, "examples/classifier_graph.svg", "loss", params=params)
