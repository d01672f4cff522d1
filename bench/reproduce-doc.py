#!/usr/bin/env python3
# Writes the findings tables of docs/reproduce.md from scenarios/seeds.toml and the seed study
# files (each finding with its [[expect]] checks, or why it has none):
#   python3 bench/reproduce-doc.py > /tmp/t.md   (then paste it under "## Every finding")
import tomllib, glob, os, sys
root=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'scenarios')
reg=tomllib.load(open(f'{root}/seeds.toml','rb'))
def fmt_where(d):
    if not d: return ''
    def flat(p,v):
        if isinstance(v,dict):
            for k,x in v.items(): yield from flat(f'{p}.{k}' if p else k, x)
        else: yield p, v
    return ', '.join(f'{k} = {v}' for k,v in flat('',d))
def check_text(e):
    m=e['metric']
    if 'rises_with' in e or 'falls_with' in e:
        s=f"{m} {'rises' if 'rises_with' in e else 'falls'} with {e.get('rises_with',e.get('falls_with'))}"
        if 'until' in e: s+=f" until {e['until']}"
        if 'tolerance' in e: s+=f" (± {e['tolerance']})"
    else:
        lo,hi=e.get('min'),e.get('max')
        s = f"{lo} ≤ {m} ≤ {hi}" if lo and hi else (f"{m} ≥ {lo}" if lo else f"{m} ≤ {hi}")
    w=fmt_where(e.get('where'))
    if w: s+=f" where {w}"
    b=fmt_where(e.get('baseline'))
    if b: s+=f" (baseline {b})"
    return s
out=[]
for seed in reg['seed']:
    checks={}
    quickdrop={}
    for st in seed['studies']:
        t=tomllib.load(open(f'{root}/{st}','rb'))
        for e in t.get('expect',[]):
            if 'finding' in e: checks.setdefault(e['finding'],[]).append((st,check_text(e)))
        for d in t.get('quick',{}).get('drop',[]): quickdrop.setdefault(d,[]).append(st)
    for c in seed.get('compare',[]):
        lo,hi=c.get('min'),c.get('max')
        r=f"{lo} ≤ ratio ≤ {hi}" if lo and hi else (f"ratio ≥ {lo}" if lo else f"ratio ≤ {hi}")
        checks.setdefault(c['finding'],[]).append(('across studies',f"{c['metric']} of {c['study'].removesuffix('.toml')} / {c['metric']} of {c['against'].removesuffix('.toml')} at equal settings: {r}"))
    for m in seed.get('mesh',[]):
        checks.setdefault(m['finding'],[]).append((f"mesh on {m['net']}",f"net set {' '.join(m['change'])} at {m['at']*100:.0f} % of {m['seconds']} s: 1 throughput event on {m['pair']}, 0 on the others"))
        quickdrop.setdefault(m['finding'],[]).append('mesh')
    out.append(f"\n### Seed {seed['id']}: {seed['title']}\n")
    out.append(f"Studies: {', '.join('`scenarios/'+s+'`' for s in seed['studies'])}.\n")
    out.append("| finding | line | what the seed found | check (study: bound) or why none |")
    out.append("|---|---|---|---|")
    for f in seed['finding']:
        if 'unchecked' in f:
            c='**not checkable**: '+f['unchecked']
        else:
            c='<br>'.join(f"{st.removesuffix('.toml')}: `{txt}`" for st,txt in checks.get(f['id'],[]))
            if f['id'] in quickdrop: c+='<br>(full run only: `--quick` drops it)'
        if f.get('partial'): c+=f"<br>Not covered: {f['partial']}"
        out.append(f"| {f['id']} | {f['line']} | {f['finding'].replace('|','/')} | {c.replace('|','/')} |")
print('\n'.join(out))
