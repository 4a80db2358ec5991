"""The service's Prometheus figures as the tests read them."""


def metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}}" if labels else f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
