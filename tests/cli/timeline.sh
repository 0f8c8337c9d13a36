#!/usr/bin/env bash
# revc mem --timeline: the SVG is well-formed XML whose every text lies
# inside the canvas and overlaps no other text (widths estimated as
# driver/timeline.c estimates them, TEXT_EM of the font size a character, 1.1
# times that for bold);
# the legend lies beside the plot, not on it; the data stays inside the
# plot; the peak's label gives the peak of `revc mem --json` (parameters +
# optimiser state + the step's buffers, in MiB), its step, and the node
# that runs there with its role, op and scope; leading steps that change
# nothing are left out, and the axis says so.
# Usage: timeline.sh REVC ROOT
set -u
revc=$(realpath "$1") root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$root" || exit 1
python3 - "$revc" "$tmp" <<'EOF'
import json, re, subprocess, sys
import xml.etree.ElementTree as ET
revc, tmp = sys.argv[1], sys.argv[2]
TEXT_EM = 0.62
NS = '{http://www.w3.org/2000/svg}'
fail = 0

def check(name, args):
    global fail
    svg = f'{tmp}/{name}.svg'
    p = subprocess.run([revc, 'mem'] + args + ['--json', '--timeline', svg], capture_output=True, text=True)
    problems = []
    if p.returncode:
        problems.append(f'exit {p.returncode}: {p.stderr}')
    else:
        r = json.loads(p.stdout)['strategies'][0]
        problems = svg_problems(svg, r)
    print(f'{"FAIL" if problems else "ok"}: revc mem {" ".join(args)} --timeline')
    for x in problems:
        print('  ' + x)
    fail += bool(problems)

def svg_problems(path, r):
    out = []
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        return [f'not well-formed XML: {e}']
    if root.tag != NS + 'svg':
        return [f'root element {root.tag}']
    W, H = float(root.get('width')), float(root.get('height'))
    if root.get('viewBox') != f'0 0 {W:.0f} {H:.0f}':
        out.append(f'viewBox {root.get("viewBox")} is not the canvas {W:.0f}x{H:.0f}')
    base = float(root.get('font-size'))
    parent = {c: p for p in root.iter() for c in p}

    def boxes(el):
        """Bounding boxes (x0, y0, x1, y1) of the texts and rects in el."""
        for e in el.iter():
            if e.tag == NS + 'text':
                size = float(e.get('font-size', base))
                bold = 1.1 if e.get('font-weight') == 'bold' else 1
                w = len(e.text or '') * size * bold * TEXT_EM
                x, y = float(e.get('x')), float(e.get('y'))
                a = e.get('text-anchor', 'start')
                x0 = x - w if a == 'end' else x - w / 2 if a == 'middle' else x
                yield (x0, y - 0.8 * size, x0 + w, y + 0.25 * size, e.text)
            elif e.tag == NS + 'rect' and e.get('x') is not None:
                x, y = float(e.get('x')), float(e.get('y'))
                yield (x, y, x + float(e.get('width')), y + float(e.get('height')), 'rect')

    def overlap(a, b):
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    def union(bs):
        bs = list(bs)
        return (min(b[0] for b in bs), min(b[1] for b in bs), max(b[2] for b in bs), max(b[3] for b in bs))

    texts = [b for b in boxes(root) if b[4] != 'rect']
    for b in texts:
        if b[0] < 0 or b[1] < 0 or b[2] > W or b[3] > H:
            out.append(f'text "{b[4]}" at {b[:4]} is cut off by the {W:.0f}x{H:.0f} canvas')
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            if overlap(a, b):
                out.append(f'texts "{a[4]}" and "{b[4]}" overlap')
    plot = root.find(f'.//{NS}rect[@id="plot"]')
    legend = root.find(f'.//{NS}g[@id="legend"]')
    peak = root.find(f'.//{NS}g[@id="peak"]')
    if plot is None or legend is None or peak is None:
        return out + ['no plot, legend or peak']
    px0, py0 = float(plot.get('x')), float(plot.get('y'))
    pbox = (px0, py0, px0 + float(plot.get('width')), py0 + float(plot.get('height')))
    lbox = union(boxes(legend))
    if overlap(lbox, pbox):
        out.append(f'the legend {lbox} lies on the plot {pbox}')
    names = [e.text for e in legend.iter(NS + 'text')]
    for cat in ('parameters', 'optimiser state', 'saved activations', 'parameter gradients',
                'transient activations and gradients', 'workspace', 'total'):
        if cat not in names:
            out.append(f'the legend lacks "{cat}"')
    for b in boxes(peak):
        if b[4] != 'rect' and overlap(b, pbox):
            out.append(f'the peak label "{b[4]}" lies on the plot')
    # The data inside the plot (half a pixel of rounding).
    for poly in root.iter(NS + 'polygon'):
        for pt in poly.get('points').split():
            x, y = map(float, pt.split(','))
            if not (pbox[0] - 0.5 <= x <= pbox[2] + 0.5 and pbox[1] - 0.5 <= y <= pbox[3] + 0.5):
                out.append(f'a point {x},{y} of the data lies outside the plot')
                break
    # The peak: its bytes, step and node.
    at = r['at_peak']
    mib = (r['peak_bytes'] + at['parameters'] + at['optimizer_state']) / 2**20
    label = [e.text for e in peak.iter(NS + 'text')]
    want = f'peak {mib:.2f} MiB at step {r["peak_step"]}'
    if not label or label[0] != want:
        out.append(f'the peak label is {label}, expected "{want}" first')
    if len(label) < 2 or not re.fullmatch(r'%[0-9]+ (fwd|bwd|recompute|opt) [a-z_0-9]+ in [a-z0-9.]+', label[1]):
        out.append(f'the peak label {label} does not name the node, role, op and scope')
    # Leading steps with no change are left out, and the axis says so.
    note = [t for t in texts if t[4] and t[4].startswith('schedule step')]
    m = re.fullmatch(r'schedule step \(steps 0 to ([0-9]+), which change no live bytes, are left out\)',
                     note[0][4] if note else '')
    if not m or not 0 < int(m.group(1)) < r['peak_step']:
        out.append(f'the step axis does not say which steps are left out: {note}')
    return out

check('fashion', ['models/fashion.rev'])
check('fashion-store', ['models/fashion.rev', '--strategy', 'store'])
check('revnet-110', ['models/revnet-110.rev'])
check('revnet-110-store', ['models/revnet-110.rev', '--strategy', 'store'])
check('revnet-38-checkpoint', ['models/revnet-38.rev', '--strategy', 'checkpoint'])
# A long name and a peak near the right edge (batch 2 at 4x4: the
# gradients at the end are the largest).
with open(f'{tmp}/long.rev', 'w') as f:
    f.write('model a_long_model_name_to_check_that_nothing_is_cut_off_anywhere_x\n'
            'input = 1,4,4\nclasses = 10\ninit_filters = 16\nunits = 1,1,1\nfilters = 16,32,64\n'
            'strides = 1,2,2\nblock = basic\nbatch = 2\n')
check('long', [f'{tmp}/long.rev'])
sys.exit(1 if fail else 0)
EOF
