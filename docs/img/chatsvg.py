"""Draws a terminal chat transcript of trainbot as a phone chat (SVG).

Usage: chatsvg.py TRANSCRIPT LOSS.CSV > chat.svg. The user's lines are the
command words the transcript's replies answer; an [image] line becomes a
chart bubble drawn from the run's stored loss points (trainbot points --csv).
"""
import csv
import html
import re
import sys

W, PAD, FONT, LINE = 360, 12, 13, 18


def wrap(text, width):
    """Wraps at spaces (a word longer than the line is cut), counting a wide
    character as two columns."""
    def cols(t):
        return sum(2 if ord(c) > 0x2E80 else 1 for c in t)
    out = []
    for raw in text.split("\n"):
        line = ""
        for word in raw.split(" "):
            cand = word if not line else line + " " + word
            if cols(cand) <= width:
                line = cand
                continue
            if line:
                out.append(line)
            line = word
            while cols(line) > width:
                out.append(line[:width])
                line = line[width:]
        out.append(line)
    return out


def replies(path):
    """Groups the transcript's lines into the bot's replies, in order."""
    lines = open(path, encoding="utf-8").read().splitlines()[1:]
    groups, cur = [], []
    starts = ("▶️", "run #", "⏹")
    for ln in lines:
        if ln.startswith("[image]"):
            if cur:
                groups.append(("text", cur))
                cur = []
            groups.append(("image", [ln]))
        elif ln.startswith("        ") and groups and groups[-1][0] == "image":
            groups[-1][1].append(ln.strip())
        elif ln.startswith(starts) and cur:
            groups.append(("text", cur))
            cur = [ln]
        else:
            cur.append(ln)
    if cur:
        groups.append(("text", cur))
    return groups


def chart(points, x, y, w, h):
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    pts = " ".join(
        "%.1f,%.1f" % (x + 8 + (px - x0) / (x1 - x0 or 1) * (w - 16), y + h - 20 - (py - y0) / (y1 - y0 or 1) * (h - 40))
        for px, py in points)
    return ('<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="#fff" stroke="#ddd"/>'
            '<polyline points="%s" fill="none" stroke="#1f77b4" stroke-width="1.6"/>'
            '<text x="%d" y="%d" font-size="10" fill="#666">loss %.3g → %.3g</text>' % (x, y, w, h, pts, x + 8, y + h - 6, ys[0], ys[-1]))


def main():
    groups = replies(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    points = [(float(r["step"]), float(r["value"])) for r in rows if r.get("value") not in (None, "", "NaN")]
    body, y = [], 64
    pending_plot = False
    shown = None  # the step the 状态 reply showed: its chart ends there


    def user(word):
        nonlocal y
        tw = len(word) * FONT + 20
        body.append('<rect x="%d" y="%d" width="%d" height="%d" rx="14" fill="#95ec69"/>' % (W - PAD - tw, y, tw, LINE + 12))
        body.append('<text x="%d" y="%d" font-size="%d">%s</text>' % (W - PAD - tw + 10, y + LINE + 1, FONT, word))
        y += LINE + 22

    for kind, lines in groups:
        first = lines[0]
        if kind == "text" and "started" in first:
            user("开始")
        elif kind == "text" and "running for" in first:
            user("状态")
            pending_plot = True
            m = re.search(r"step (\d+)/", " ".join(lines))
            shown = float(m.group(1)) if m else None
        elif kind == "text" and first.startswith("⏹ stopping"):
            user("停止")
        elif kind == "image" and pending_plot:
            user("画图")
            pending_plot = False
        if kind == "image":
            caption = lines[-1]
            if "memory" in caption:
                continue
            upto = [p for p in points if shown is None or p[0] <= shown]
            shown = None
            body.append(chart(upto, PAD, y, 240, 120))
            body.append('<text x="%d" y="%d" font-size="10" fill="#444">%s</text>' % (PAD, y + 134, html.escape(caption)))
            y += 146
            continue
        text = [ln for ln in lines if not ln.startswith(("pid ", "[buttons]"))]
        buttons = any(ln.startswith("[buttons]") for ln in lines)
        wrapped = []
        for ln in text:
            wrapped += wrap(ln, 46)
        h = len(wrapped) * LINE + 14
        body.append('<rect x="%d" y="%d" width="%d" height="%d" rx="10" fill="#fff"/>' % (PAD, y, W - 2 * PAD - 20, h))
        for i, ln in enumerate(wrapped):
            body.append('<text x="%d" y="%d" font-size="%d">%s</text>' % (PAD + 10, y + 20 + i * LINE, FONT - 1, html.escape(ln)))
        y += h + 6
        if buttons:
            for i, b in enumerate(["停止 Stop", "状态 Status", "画图 Plot"]):
                bx = PAD + i * 100
                body.append('<rect x="%d" y="%d" width="94" height="26" rx="6" fill="#e8eef5"/>' % (bx, y))
                body.append('<text x="%d" y="%d" font-size="11" text-anchor="middle" fill="#2a5885">%s</text>' % (bx + 47, y + 17, b))
            y += 34
        y += 6
    height = y + 20
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">' % (W, height, W, height),
           '<rect width="%d" height="%d" rx="24" fill="#ededed"/>' % (W, height),
           '<rect width="%d" height="48" rx="24" fill="#f7f7f7"/><rect y="24" width="%d" height="24" fill="#f7f7f7"/>' % (W, W),
           '<text x="%d" y="30" font-size="15" text-anchor="middle" font-weight="bold">trainbot</text>' % (W // 2)]
    out += body
    out.append("</svg>")
    print("\n".join(out))


main()
