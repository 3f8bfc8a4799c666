"""Prints the structure of a plan picture (smpc plan --report, plan.svg) for
FileCheck: its rows, stages, legend, axis, whether the steady state is cut,
how many shapes it draws and whether they all lie on the page."""
import sys
import xml.dom.minidom as minidom

doc = minidom.parse(sys.argv[1])
svg = doc.documentElement
width, height = float(svg.getAttribute("width")), float(svg.getAttribute("height"))
texts = [n.firstChild.data for n in doc.getElementsByTagName("text") if n.firstChild]
rects = doc.getElementsByTagName("rect")[1:]  # [0]: the white page
print("rows", sum(1 for t in texts if t.startswith("rank ")))
print("stages", sum(1 for t in texts if t.startswith("stage ")))
legend = [t for t in texts if t.split(" ")[0] in
          ("F", "B", "BI", "BW", "gradient", "optimizer", "idle", "parameters",
           "gradients", "activations", "workspace")]
print("legend:", " | ".join(legend))
print("axis:", [t for t in texts if t.startswith("time (")])
print("cut:", any(t.startswith("steady state cut") for t in texts))
inside = all(float(r.getAttribute("x") or 0) + float(r.getAttribute("width")) <= width + 1
             and float(r.getAttribute("y") or 0) + float(r.getAttribute("height")) <= height + 1
             for r in rects)
print("shapes", "many" if len(rects) > 3000 else "few", "inside" if inside else "OUTSIDE")
