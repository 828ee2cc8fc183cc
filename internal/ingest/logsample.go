package ingest

// requestLinesPerSecond is how many INFO lines about accepted requests
// (a 2xx answer) ingest writes in one second. Past it, such requests are
// counted rather than logged, and the count, by result, is logged once a
// later second begins. Warnings and errors (4xx, 5xx) are always written.
// At full rate the line was a tenth of ingest's CPU (its formatting, and a
// write to stderr each); the counters in /metrics count every request.
const requestLinesPerSecond = 100

// requestLinesSummary is the message of the line that counts the lines
// of accepted requests not written.
const requestLinesSummary = "webhook lines over the budget were counted, not written"
