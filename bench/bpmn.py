"""The reference workflows (100-step noop chain, 1,000-iteration noop loop, 1,000 exclusive
decisions) as BPMN 2.0 XML, for SpiffWorkflow (the peer runs them).

* `chain(n)`: start → n script tasks (`pass`) → end.
* `loop(n)`: one script task, sequential multi-instance over a cardinality of n.
* `decisions(n)`: a script task `i = i + 1` and an exclusive gateway back to it while
  `i < n`, else to the end: n exclusive decisions.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<bpmn:definitions xmlns:bpmn="http://www.omg.org/spec/BPMN/20100524/MODEL" '
    'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'id="defs" targetNamespace="http://noetlc.bench">\n'
    '<bpmn:process id="{pid}" isExecutable="true">\n'
)
_TAIL = "</bpmn:process>\n</bpmn:definitions>\n"


def _flow(fid: str, src: str, dst: str, condition: str | None = None) -> str:
    if condition is None:
        return f'<bpmn:sequenceFlow id="{fid}" sourceRef="{src}" targetRef="{dst}"/>\n'
    return (
        f'<bpmn:sequenceFlow id="{fid}" sourceRef="{src}" targetRef="{dst}">'
        f'<bpmn:conditionExpression xsi:type="bpmn:tFormalExpression">{escape(condition)}'
        "</bpmn:conditionExpression></bpmn:sequenceFlow>\n"
    )


def _script(tid: str, code: str, extra: str = "") -> str:
    return f'<bpmn:scriptTask id="{tid}">{extra}<bpmn:script>{escape(code)}</bpmn:script></bpmn:scriptTask>\n'


def chain(n: int) -> str:
    parts = [_HEAD.format(pid="chain"), '<bpmn:startEvent id="start"/>\n']
    previous = "start"
    for i in range(n):
        parts.append(_script(f"t{i}", "pass"))
        parts.append(_flow(f"f{i}", previous, f"t{i}"))
        previous = f"t{i}"
    parts += ['<bpmn:endEvent id="end"/>\n', _flow("fend", previous, "end"), _TAIL]
    return "".join(parts)


def loop(n: int) -> str:
    mi = (
        '<bpmn:multiInstanceLoopCharacteristics isSequential="true">'
        f"<bpmn:loopCardinality>{n}</bpmn:loopCardinality>"
        "</bpmn:multiInstanceLoopCharacteristics>"
    )
    return "".join(
        [
            _HEAD.format(pid="loop"),
            '<bpmn:startEvent id="start"/>\n',
            _script("work", "pass", mi),
            '<bpmn:endEvent id="end"/>\n',
            _flow("f0", "start", "work"),
            _flow("f1", "work", "end"),
            _TAIL,
        ]
    )


def decisions(n: int) -> str:
    return "".join(
        [
            _HEAD.format(pid="decisions"),
            '<bpmn:startEvent id="start"/>\n',
            _script("init", "i = 0"),
            _script("decide", "i = i + 1"),
            '<bpmn:exclusiveGateway id="gw" default="fdone"/>\n',
            '<bpmn:endEvent id="end"/>\n',
            _flow("f0", "start", "init"),
            _flow("f1", "init", "decide"),
            _flow("f2", "decide", "gw"),
            _flow("fback", "gw", "decide", f"i < {n}"),
            _flow("fdone", "gw", "end"),
            _TAIL,
        ]
    )
