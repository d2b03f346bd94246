"""Where each streaming batch's time went, from a Spark event log: jobs, stages and tasks per
batch, and the wall time of each (medians and p90 over the batches).

    PYSPARK_SUBMIT_ARGS="--conf spark.eventLog.enabled=true --conf spark.eventLog.compress=false \\
        --conf spark.eventLog.dir=file:///tmp/events pyspark-shell" \\
        python -m reliable_kafka.examples.wordcount --duration 120 --rate 400
    python benchmarks/batch_event_log.py /tmp/events/eventlog_v2_*/events_* [--batches]

Jobs belong to the batch named by their ``spark.streaming.internal.batchTime`` property (the job
scheduler sets it); the n-th job of a batch and the stages in it are named by their output
operation id and the stage's call site (``op1.0.take``: output operation 1's first job, its stage
``take``). A stage's wall time runs from its submission to its completion; "submit lag" is from
its job's submission to the stage's; a task's "run" is Spark's executor run time (a Python task's
includes its worker's time), "launch lag" from the stage's submission to the task's launch.
"Between jobs" is the batch's time with no job running: the driver's own work between them.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import statistics
from pathlib import Path
from typing import Any


def read_events(paths: list[Path]) -> list[dict[str, Any]]:
    events = []
    for path in paths:
        with path.open() as lines:
            events.extend(json.loads(line) for line in lines if line.strip())
    return events


def by_batch(events: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Each batch's jobs, in submission order, each with its stages and their tasks."""
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = {}
    tasks: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for event in events:
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            properties = event.get("Properties") or {}
            batch = properties.get("spark.streaming.internal.batchTime")
            if batch is not None:
                jobs[event["Job ID"]] = {
                    "batch": int(batch),
                    "op": properties.get("spark.streaming.internal.outputOpId"),
                    "submitted": event["Submission Time"],
                    "stage_ids": event["Stage IDs"],
                }
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            jobs[event["Job ID"]]["ended"] = event["Completion Time"]
        elif kind in ("SparkListenerStageSubmitted", "SparkListenerStageCompleted"):
            info = event["Stage Info"]
            stage = stages.setdefault(info["Stage ID"], {"name": info["Stage Name"].split(" at ")[0]})
            stage["submitted"] = info.get("Submission Time")
            stage["ended"] = info.get("Completion Time")
        elif kind == "SparkListenerTaskEnd":
            info, metrics = event["Task Info"], event.get("Task Metrics") or {}
            tasks[event["Stage ID"]].append(
                {"launched": info["Launch Time"], "run": metrics.get("Executor Run Time", 0)}
            )
    batches: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for job in sorted(jobs.values(), key=lambda job: job["submitted"]):
        job["stages"] = [
            {**stages[s], "tasks": tasks[s]} for s in job["stage_ids"] if s in stages and stages[s]["ended"]
        ]
        if "ended" in job:
            batches[job["batch"]].append(job)
    return batches


def figures(batches: dict[int, list[dict[str, Any]]]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = collections.defaultdict(list)
    for jobs in batches.values():
        found["batch: jobs"].append(len(jobs))
        found["batch: stages run"].append(sum(len(job["stages"]) for job in jobs))
        found["batch: tasks"].append(sum(len(s["tasks"]) for job in jobs for s in job["stages"]))
        found["batch: first job submitted to last job ended, ms"].append(
            jobs[-1]["ended"] - jobs[0]["submitted"]
        )
        found["batch: between jobs, ms"].append(
            sum(max(0, b["submitted"] - a["ended"]) for a, b in itertools.pairwise(jobs))
        )
        for index, job in enumerate(jobs):
            found[f"op{job['op']}.{index} job, ms"].append(job["ended"] - job["submitted"])
            for stage in job["stages"]:
                name = f"op{job['op']}.{index}.{stage['name']}"
                found[f"{name} stage, ms"].append(stage["ended"] - stage["submitted"])
                found[f"{name} submit lag, ms"].append(stage["submitted"] - job["submitted"])
                found[f"{name} tasks"].append(len(stage["tasks"]))
                for task in stage["tasks"]:
                    found["task: run, ms"].append(task["run"])
                    found["task: launch lag, ms"].append(task["launched"] - stage["submitted"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("event_logs", nargs="+", type=Path, help="the event log's files (uncompressed)")
    parser.add_argument("--batches", action="store_true", help="also print each batch's jobs")
    args = parser.parse_args()
    batches = by_batch(read_events(args.event_logs))
    if args.batches:
        for time_ms, jobs in sorted(batches.items()):
            stages = "; ".join(
                f"op{job['op']}: "
                + ", ".join(
                    f"{s['name']} x{len(s['tasks'])} {s['ended'] - s['submitted']} ms" for s in job["stages"]
                )
                for job in jobs
            )
            print(f"{time_ms}: {stages}")
    print(f"{len(batches)} batches{'':<38}{'p50':>8}{'p90':>8}{'mean':>8}")
    for name, values in sorted(figures(batches).items()):
        ordered = sorted(values)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        print(f"{name:<52}{statistics.median(ordered):>8.0f}{p90:>8.0f}{statistics.mean(ordered):>8.1f}")


if __name__ == "__main__":
    main()
