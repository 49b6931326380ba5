"""Figures of the million-email day from the two ESP ledgers, the API log and the database:
latency per priority, campaign completion, scheduled lateness, lost/duplicates, and the plot."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

from bench.harness import percentile


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None}
    return {"n": len(values), **{f"p{q}": round(percentile(values, q / 100), 3) for q in (50, 95, 99)},
            "max": round(max(values), 3)}


def acceptances(primary: list[tuple[str, float]],
                secondary: list[tuple[str, float]]) -> dict[str, list[tuple[str, float]]]:
    """Our message id -> [(esp, accepted_at)] in time order."""
    seen: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for esp, entries in (("sendgrid", primary), ("smtp", secondary)):
        for message_id, at in entries:
            seen[message_id].append((esp, at))
    for rows in seen.values():
        rows.sort(key=lambda row: row[1])
    return seen


def delivery_counts(expected: set[str], seen: dict, ambiguous: set[str], pending: set[str],
                    held_for_operator: set[str] = frozenset()) -> dict:
    """lost = expected - delivered - still pending when a hard time bound stopped the run (listed
    apart). An AMBIGUOUS message no ESP received is lost (decision 89 settles those from the
    ESP's evidence), except the ones held for an operator by rule (`held_for_operator`: an SMTP
    transaction in flight, where only the server knows), listed apart."""
    delivered = expected & seen.keys()
    dups = sorted(m for m in delivered if len(seen[m]) > 1)
    cross = sorted(m for m in dups if len({esp for esp, _ in seen[m]}) > 1)
    held = (ambiguous & held_for_operator) - delivered
    lost = sorted(expected - delivered - pending - held, key=int)
    return {
        "held_for_operator": len(held), "held_for_operator_ids": sorted(held, key=int)[:20],
        "expected": len(expected), "delivered_distinct": len(delivered),
        "lost": len(lost), "lost_ids_sample": lost[:20],
        "pending_at_stop": len(pending - delivered),
        "duplicates": len(dups), "duplicate_ids_sample": dups[:20],
        "cross_esp_duplicates": len(cross),
        "unexpected_ids": len(seen.keys() - expected),
        "ambiguous": {"count": len(ambiguous),
                      "reconciled_delivered_once": sorted(m for m in ambiguous if len(seen.get(m, [])) == 1),
                      "not_at_any_esp": sorted(m for m in ambiguous if m not in seen)},
        "via_secondary": sum(1 for m in delivered if seen[m][0][0] == "smtp"),
    }


def latency(sent: list, seen: dict, label: str) -> dict:
    return percentiles([seen[s.message_id][0][1] - s.started for s in sent
                        if s.label == label and s.message_id in seen])


def resent_figures(sent: list, seen: dict, resent: set[str], campaign_ids: set[str]) -> dict:
    """The sends re-sent after their ESP's evidence (decision 89): how many per stream, and the
    request-to-ESP time of the streams' ones (the evidence window is most of it)."""
    by_label = Counter(s.label for s in sent if s.message_id in resent)
    waits = [seen[s.message_id][0][1] - s.started for s in sent
             if s.message_id in resent and s.message_id in seen]
    return {"count": len(resent), "campaign": len(resent & campaign_ids), "streams": dict(by_label),
            "stream_latency": percentiles(waits)}


STAGES = ("driver", "web", "queue", "claim_to_send", "esp")


def _stage_spans(s, rows: dict, seen: dict) -> list[float] | None:
    """One message's seconds in each of STAGES, None where a point in time is missing."""
    row = rows.get(s.message_id)
    if row is None or None in row or s.written is None or s.message_id not in seen:
        return None
    created, claimed, started = row
    points = (s.started, s.written, created, claimed, started, seen[s.message_id][0][1])
    return [end - begin for begin, end in pairwise(points)]


def stages(sent: list, rows: dict, seen: dict, label: str) -> dict:
    """Where a stream's latency goes, per message: the driver's own wait before the request was
    on the socket, the web until the row's INSERT (created_at), the queue until the claim, the
    claim until the send started, the send until the ESP's acceptance; p50/p99 of each (s).
    `rows` maps message id -> (created_at, claimed_at, send_started_at) as epoch seconds."""
    spans: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for s in sent:
        split = _stage_spans(s, rows, seen) if s.label == label else None
        for stage, span in zip(STAGES, split or (), strict=False):
            spans[stage].append(span)
    return {stage: {k: v for k, v in percentiles(values).items() if k in ("n", "p50", "p99")}
            for stage, values in spans.items()}


TAIL_WINDOW_SECONDS = 10.0


def _fault_name(fault: dict) -> str:
    return fault["kind"] + (f" {fault['role']}" if "role" in fault else "")


def tail_windows(sent: list, seen: dict, label: str, over: float, t0: float,
                 faults: list[dict]) -> list[dict]:
    """Where a stream's tail lies in time: per window of request start times holding a message
    slower than `over` seconds, the count over and the count in all, with the faults of that
    window, so a run says which fault (or none) its p99 came from."""
    width = TAIL_WINDOW_SECONDS
    windows: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for s in sent:
        if s.label == label and s.message_id in seen:
            counts = windows[int((s.started - t0) // width)]
            counts[1] += 1
            counts[0] += seen[s.message_id][0][1] - s.started > over
    in_window = defaultdict(set)
    for fault in faults:
        in_window[int((fault["t"] - t0) // width)].add(_fault_name(fault))
    return [{"from_s": index * width, "over": over_n, "n": n, "faults": sorted(in_window[index])}
            for index, (over_n, n) in sorted(windows.items()) if over_n]


def _tail_line(tail: list[dict], worst: int = 8) -> str:
    shown = sorted(sorted(tail, key=lambda w: -w["over"])[:worst], key=lambda w: w["from_s"])
    return (f"    slowest {TAIL_WINDOW_SECONDS:g}-s windows (from s: over target / n [faults]): "
            + ", ".join(f"{w['from_s']:g}: {w['over']}/{w['n']}"
                        + (f" [{', '.join(w['faults'])}]" if w["faults"] else "") for w in shown))


def lateness(sent: list, seen: dict) -> dict:
    return percentiles([seen[s.message_id][0][1] - s.send_at for s in sent
                        if s.label == "P3" and s.message_id in seen])


def campaign_figures(ids: set[str], seen: dict, launched: float) -> dict:
    times = sorted(seen[m][0][1] for m in ids if m in seen)
    if not times:
        return {"recipients": len(ids), "completed": False}
    n = len(ids)
    low, high = times[int(0.05 * (len(times) - 1))], times[int(0.95 * (len(times) - 1))]
    return {
        # completed: every recipient at an ESP (AMBIGUOUS rows held for reconciliation are not)
        "recipients": n, "delivered": len(times), "completed": len(times) == n,
        "first_acceptance_s": round(times[0] - launched, 1),
        "completion_s": round(times[-1] - launched, 1),
        "sustained_per_s": round(0.9 * len(times) / max(high - low, 1e-6)),
        "overall_per_s": round(len(times) / max(times[-1] - launched, 1e-6)),
    }


def table(result: dict) -> str:
    lines = [f"million-email day: {result['config']['recipients']:,} recipients, "
             f"{result['config']['broker']} broker, run {result['elapsed_s']} s"]
    for label in ("P0", "P1"):
        lat = result["latency"][label]
        offered = result["config"][f"{label.lower()}_rate"]
        accepted = result["api_sent"][label] / max(result["api_load_seconds"], 1e-9)
        lines.append(f"  {label} latency (request -> ESP) n={lat['n']}: p50 {lat['p50']} s  "
                     f"p95 {lat['p95']} s  p99 {lat['p99']} s  max {lat['max']} s  "
                     f"(accepted {accepted:.1f}/s of {offered:g}/s asked)")
        split = result.get("stages", {}).get(label)
        if split:
            lines.append("    p50 / p99 s: " + ", ".join(
                f"{stage} {v['p50']} / {v['p99']}" for stage, v in split.items()))
        tail = result.get("tail_windows", {}).get(label)
        if tail:
            lines.append(_tail_line(tail))
    late = result["p3_lateness"]
    lines.append(f"  P3 lateness (send_at -> ESP) n={late['n']}: p50 {late['p50']} s  "
                 f"p99 {late['p99']} s  max {late['max']} s")
    camp = result["campaign"]
    lines.append(f"  P2 campaign: completed={camp.get('completed')} in {camp.get('completion_s')} s, "
                 f"sustained {camp.get('sustained_per_s')}/s, overall {camp.get('overall_per_s')}/s")
    d = result["delivery"]
    lines.append(f"  expected {d['expected']:,}  delivered {d['delivered_distinct']:,}  lost {d['lost']}  "
                 f"dup {d['duplicates']}  cross-ESP dup {d['cross_esp_duplicates']}  "
                 f"via secondary {d['via_secondary']:,}  pending at stop {d['pending_at_stop']:,}")
    amb = d["ambiguous"]
    once = len(amb["reconciled_delivered_once"])
    lines.append(f"  AMBIGUOUS at the end {amb['count']}: at an ESP once {once}, "
                 f"at no ESP {len(amb['not_at_any_esp'])} (of which held for an operator, SMTP in "
                 f"flight: {d.get('held_for_operator', 0)}; the rest count as lost)")
    again = result.get("resent_after_evidence") or {}
    if again.get("count"):
        wait = again["stream_latency"]
        lines.append(f"  re-sent after the ESP's evidence (not in the latencies above): {again['count']} "
                     f"(campaign {again['campaign']}, streams {again['streams']}), stream request -> "
                     f"ESP p50 {wait.get('p50')} s, max {wait.get('max')} s")
    lines.append(f"  API errors {len(result['api_errors'])}; faults {len(result['faults'])}")
    lines.append("  peak RSS MB: " + ", ".join(f"{k} {v}" for k, v in result["peak_rss_mb"].items()))
    lines.append("  CPU s: " + ", ".join(f"{k} {v}" for k, v in result["cpu_seconds"].items()))
    shares = result.get("machine", {}).get("cpu_shares")
    lines.append("  cpu.shares: " + (", ".join(f"{k} {v}" for k, v in shares.items()) if shares
                                     else "none (every process group weighs the same)"))
    return "\n".join(lines)


def plot(path: Path, series: list[dict], sent: list, seen: dict, t0: float, faults: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    for label in ("P0", "P1", "P2", "P3"):
        top.plot([s["t"] - t0 for s in series], [s["depth"].get(label, 0) for s in series], label=label)
    top.set_ylabel("broker queue depth (tasks)")
    top.legend(loc="upper right")
    points = sorted((s.started - t0, seen[s.message_id][0][1] - s.started)
                    for s in sent if s.label == "P0" and s.message_id in seen)
    bottom.scatter([p[0] for p in points], [p[1] for p in points], s=3)
    bottom.set_ylabel("P0 latency (s)")
    bottom.set_xlabel("seconds since campaign launch")
    for fault in faults:
        for axis in (top, bottom):
            axis.axvline(fault["t"] - t0, color="red" if "kill" not in fault["kind"] else "grey",
                         alpha=0.4, linewidth=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_messages_csv(path: Path, sent: list, rows: dict, seen: dict, t0: float) -> None:
    """Every P0/P1 message: when its request started (s after launch), its latency and its
    stages, for looking at a tail in detail (the JSON keeps only percentiles)."""
    with path.open("w") as out:
        out.write("label,start_s,latency_s," + ",".join(STAGES) + "\n")
        for s in sent:
            if s.label in ("P0", "P1") and s.message_id in seen:
                split = _stage_spans(s, rows, seen) or [None] * len(STAGES)
                values = [s.started - t0, seen[s.message_id][0][1] - s.started, *split]
                out.write(s.label + "," + ",".join("" if v is None else f"{v:.4f}" for v in values) + "\n")


def write_json(path: Path, result: dict) -> None:
    path.write_text(json.dumps(result, indent=2, default=str))
