// Package startup waits for what a daemon needs before it can serve: it
// tries a step (a NATS connection, JetStream answering, the streams and
// buckets) again and again with capped, jittered exponential backoff, logs
// when it starts waiting and each time the reason changes (not every try),
// and tells /readyz what it waits for. A step's error marked Fatal (a
// configuration error, refused credentials) ends the wait at once; so does
// the context, promptly.
//
// It must not know what the steps are: NATS, JetStream and Drover's layout
// belong to packages natsconn and queue, the order to the daemons.
package startup
