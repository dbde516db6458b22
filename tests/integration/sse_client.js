// tests/integration/sse_client.js: a change-stream client built on the `eventsource` npm package
// (a client no one here wrote), driven by tests/integration/test_insights.c.
//
//   node sse_client.js TOKEN LAST_ID STOP_SEQ PER_SEGMENT RECONNECTS URL1 [URL2...]
//
// Connects to URL1 with `Last-Event-ID: LAST_ID` (unless it is "-"); after PER_SEGMENT events it
// closes and connects to the next URL (round robin) with the id of the last event it received,
// RECONNECTS times at most; it stops at the event whose object has the label seq=STOP_SEQ.
// Prints one line per event, "ID TYPE KIND NAME LABEL_SEQ" (- when none), then "done" and the
// number of connections. Exits 1 after 90 s without finishing, or on an HTTP error status.
'use strict';
const EventSource = require('eventsource');

const [token, firstId, stopSeq, perSegmentArg, reconnectsArg, ...urls] = process.argv.slice(2);
const perSegment = Number(perSegmentArg), reconnects = Number(reconnectsArg);
let lastId = firstId === '-' ? null : firstId;
let got = 0, segment = 0, inSegment = 0, es = null, finished = false;

const timer = setTimeout(() => {
    console.log(`timeout after ${got} events`);
    process.exit(1);
}, 90000);

function connect() {
    const url = urls[segment % urls.length];
    const headers = { Authorization: `Bearer ${token}` };
    if (lastId) headers['Last-Event-ID'] = lastId;
    inSegment = 0;
    const self = new EventSource(url, { headers });
    es = self;
    const onEvent = (ev) => {
        // a closed EventSource may still hand over events it had parsed, or even reconnect on
        // its own (eventsource 2.x): only the current connection counts
        if (es !== self || finished) {
            self.close();
            return;
        }
        lastId = ev.lastEventId;
        const d = JSON.parse(ev.data);
        const seq = d.object && d.object.labels && d.object.labels.seq ? d.object.labels.seq : '-';
        console.log(`${ev.lastEventId} ${ev.type} ${d.kind || '-'} ${d.name || '-'} ${seq}`);
        if (ev.type === 'reset') return;
        got++;
        inSegment++;
        if (seq === stopSeq) {
            finished = true;
            es.close();
            clearTimeout(timer);
            process.stdout.write(`done ${segment + 1}\n`, () => process.exit(0));
            return;
        }
        if (inSegment >= perSegment && segment < reconnects) {
            es.close();
            segment++;
            setImmediate(connect);
        }
    };
    self.addEventListener('upsert', onEvent);
    self.addEventListener('delete', onEvent);
    self.addEventListener('reset', onEvent);
    self.onerror = (e) => {
        if (e && e.status) {
            console.log(`error status ${e.status}`);
            process.exit(1);
        }
    };
}
connect();
