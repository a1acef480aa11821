"""Checks that the --explore table and its JSON say the same thing.

    check_explore_table.py TABLE.txt EXPLORE.json

Every row of the table is parsed back and compared with the JSON entry of
the same position: combination (with its optimizer state bits and frozen weights' storage), planned peak (formatted as the table
formats bytes), fit, extra FLOPs, step time, throughput and the chosen
mark; the explanation lines must be the JSON's. Exits 1 on a difference.
"""

import json
import re
import sys


def format_bytes(n):
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    if n < 1024:
        return "%d B" % n
    value, unit = float(n), 0
    while value >= 1024 and unit < 4:
        value /= 1024
        unit += 1
    return "%.2f %s" % (value, units[unit])


def format_flops(n):
    units = ["FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"]
    if n < 1000:
        return "%d FLOP" % n
    value, unit = float(n), 0
    while value >= 1000 and unit < 5:
        value /= 1000
        unit += 1
    return "%.2f %s" % (value, units[unit])


def format_seconds(s):
    return "%.3f s" % s if s >= 1 else "%.2f ms" % (s * 1e3)


ROW = re.compile(r"^([* ]) (\S+)\s+(\S+)\s+(\d+)\s+(\d+)bit\s+(\S+)\s+"
                 r"(\d+(?:\.\d+)? \w+)\s+"
                 r"(yes|no)\s+(\d+(?:\.\d+)? \w+) \((\d+\.\d)%\)\s+"
                 r"(\d+\.\d+ m?s)\s+(\d+)$")


def main(table_path, json_path):
    lines = open(table_path).read().splitlines()
    report = json.load(open(json_path))
    rows = [ROW.match(line) for line in lines]
    rows = [m for m in rows if m]
    combos = report["combinations"]
    errors = []
    if len(rows) != len(combos):
        errors.append("%d table rows, %d JSON combinations"
                      % (len(rows), len(combos)))
    rate = "tokens_per_second" if report["tokens_per_step"] else \
        "samples_per_second"
    for m, c in zip(rows, combos):
        base = c["flops"] - c["extra_flops"]
        expected = (
            "*" if c["chosen"] else " ", c["precision"], c["remat"],
            str(c["micro_batches"]), str(c["optimizer_state_bits"]),
            c["frozen_weights"],
            format_bytes(c["planned_peak_bytes"]),
            "yes" if c["fits"] else "no", format_flops(c["extra_flops"]),
            "%.1f" % (100.0 * c["extra_flops"] / base if base else 0.0),
            format_seconds(c["step_seconds"]), "%.0f" % c[rate])
        if m.groups() != expected:
            errors.append("table %s != JSON %s" % (m.groups(), expected))
    chosen = [i for i, c in enumerate(combos) if c["chosen"]]
    if chosen != ([report["chosen"]] if report["chosen"] is not None else []):
        errors.append("chosen marks %s, JSON chosen %s"
                      % (chosen, report["chosen"]))
    for line in report["explanation"]:
        if "  " + line not in lines:
            errors.append("explanation line missing from the table: " + line)
    for e in errors:
        print("MISMATCH", e)
    print("%d rows, chosen %s, %d explanation lines checked"
          % (len(rows), report["chosen"], len(report["explanation"])))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
