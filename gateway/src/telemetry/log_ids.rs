//! Trace ids in log lines: a log line written inside a traced span names the trace and
//! the span (`"trace_id"` and `"span_id"` members of a JSON line; ` trace_id=… span_id=…`
//! at the end of a text line, when the log is not a terminal with colours), so a line in
//! the log leads to its trace and back.
//!
//! Installed only when spans are exported; the ids are those of the OpenTelemetry context
//! current where the line is written (the entered span, or the request being served).

use std::fmt;

use opentelemetry::trace::TraceContextExt;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Wraps the event format `inner` (`json` says which of the two it is).
pub struct WithTraceIds<F> {
    pub inner: F,
    pub json: bool,
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let ids = current_ids();
        let Some((trace_id, span_id)) = ids.filter(|_| self.json || !writer.has_ansi_escapes())
        else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::with_capacity(256);
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        let body = line.strip_suffix('\n').unwrap_or(&line);
        if self.json {
            match body.strip_suffix('}') {
                // `{"timestamp":…,"fields":{…},"target":…}` gets two more members.
                Some(open) => writeln!(
                    writer,
                    "{open},\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"}}"
                ),
                None => writer.write_str(&line),
            }
        } else {
            writeln!(writer, "{body} trace_id={trace_id} span_id={span_id}")
        }
    }
}

/// The trace and span id of the current OpenTelemetry context, if it has a valid span.
pub fn current_ids() -> Option<(String, String)> {
    let cx = opentelemetry::Context::current();
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid()
        .then(|| (sc.trace_id().to_string(), sc.span_id().to_string()))
}
