"""Invoicing product code: the part an agent patches."""

import json
import random
from datetime import datetime, timezone
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

CENT = Decimal("0.01")


def render_invoice(request, now):
    net = sum((Decimal(line["amount"]) for line in request["lines"]), Decimal("0"))
    tax = (net * Decimal(request["tax_rate"])).quantize(CENT, rounding=ROUND_HALF_EVEN)
    result = {
        "invoice_id": request["invoice_id"],
        "currency": request["currency"],
        "net": str(net),
        "tax": str(tax),
        "total": str(net + tax),
        "issued_at": datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    receipt = Path("out") / f"{request['invoice_id']}.json"
    receipt.parent.mkdir(exist_ok=True)
    receipt.write_text(json.dumps(result))
    return result


def choose_tool(request, seed):
    words = set(request["query"].lower().replace(",", " ").split())
    scored = []
    for tool in request["tools"]:
        score = sum(1 for keyword in tool["keywords"] if set(keyword.split()) <= words)
        scored.append((score, tool["name"]))
    best = max(score for score, _ in scored)
    # Ties are broken at random; the seed makes each trial an independent, replayable draw.
    name = random.Random(seed).choice([n for s, n in scored if s == best])
    return {"tool": name, "score": best}


# Routing samples like a model's answer does: the best-scoring tool, except that about one draw in
# twenty (SLIP) goes to the runner-up. The seed makes each trial's draw replayable.
SLIP = 0.05


def route_ticket(request, seed):
    words = set(request["query"].lower().replace(",", " ").split())
    scored = []
    for tool in request["tools"]:
        score = sum(1 for keyword in tool["keywords"] if set(keyword.split()) <= words)
        scored.append((score, tool["name"]))
    (score, best), (_, runner_up) = sorted(scored, reverse=True)[:2]
    name = runner_up if random.Random(seed).random() < SLIP else best
    return {"tool": name, "score": score}
