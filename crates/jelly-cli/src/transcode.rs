//! `jelly rdf transcode`: decode Jelly streams and re-encode them (merge, re-frame,
//! change options). The encoder assigns its own lookup ids.

use jelly::Event;

use crate::cli::{FramePer, TranscodeArgs};
use crate::common::{GroupingWriter, apply_option_flags, logical_for_frame_per, options_from_file};
use crate::error::{CliError, CliResult, decode_error, not_jelly_hint};
use crate::io::{Output, Progress, display_name, open_output};

/// Runs the command.
pub fn run(args: &TranscodeArgs, quiet: bool) -> CliResult {
    let inputs: Vec<String> = if args.inputs.is_empty() {
        vec!["-".to_string()]
    } else {
        args.inputs.clone()
    };
    if inputs.iter().filter(|i| *i == "-").count() > 1 {
        return Err(CliError::usage("stdin (`-`) can be read only once"));
    }
    crate::format::check_jelly_output("transcode", args.to.as_deref())?;
    // Keep the input's frame boundaries unless asked to re-frame.
    let reframe = args.framing.rows_per_frame.is_some() || args.framing.bytes_per_frame.is_some();
    let frame_per = match (args.framing.frame_per, reframe) {
        (Some(f), _) => Some(f),
        (None, true) => None,
        (None, false) => Some(FramePer::Frame),
    };
    let from_file = match &args.opts.options_from {
        Some(p) => Some(options_from_file(p)?),
        None => None,
    };
    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let mut output: Option<Output> = Some(open_output(args.to.as_deref())?);
    let mut writer: Option<GroupingWriter<Output>> = None;
    let mut progress: Option<Progress> = None;
    let mut frames_seen = 0u64;
    let result = (|| -> CliResult {
        for (n, path) in inputs.iter().enumerate() {
            let input = crate::jelly_text::open_jelly_input(path, quiet)?;
            let name = input.name.clone();
            match &mut progress {
                None => progress = Some(Progress::new(quiet, input.bytes_read.clone())),
                Some(p) => p.set_bytes(input.bytes_read.clone()),
            }
            let mut reader = crate::limits::jelly_reader(input.reader);
            if let Some(w) = writer.as_mut() {
                w.start_input(n + 1, inputs.len());
            }
            let bad =
                |e: jelly::DecodeError| not_jelly_hint(decode_error(&name, &e), path, e.frame);
            // The graph opened by the last graph_start while it has no statement (a
            // graph may span frames, so this lives across them).
            let mut empty: Option<jelly::Term> = None;
            while let Some(mut frame) = reader.next_frame().map_err(bad)? {
                let i = frame.index();
                frames_seen += 1;
                // Kept frame by frame, so the metadata stays with its frame; re-framed
                // output has no frame to carry it.
                let metadata: Vec<(String, Vec<u8>)> = if frame_per == Some(FramePer::Frame) {
                    let m = frame.metadata().map_err(|e| decode_error(&name, &e))?;
                    m.into_iter()
                        .map(|(k, v)| (k.to_owned(), v.to_vec()))
                        .collect()
                } else {
                    Vec::new()
                };
                let at = || format!("{name}:frame {i}");
                while let Some(ev) = frame.next_event().map_err(bad)? {
                    match ev {
                        Event::Options(o) => {
                            if writer.is_some() {
                                continue;
                            }
                            let mut opts = from_file.clone().unwrap_or_else(|| o.clone());
                            if let Some(p) = args.opts.preset {
                                let t = match p {
                                    crate::cli::Preset::Small => jelly::StreamOptions::small(),
                                    crate::cli::Preset::Big => jelly::StreamOptions::big(),
                                };
                                opts.max_name_table_size = t.max_name_table_size;
                                opts.max_prefix_table_size = t.max_prefix_table_size;
                                opts.max_datatype_table_size = t.max_datatype_table_size;
                            }
                            let ns =
                                args.framing.enable_namespace_declarations || opts.version >= 2;
                            opts.version = 0;
                            opts = apply_option_flags(opts, &args.opts, quiet);
                            if args.opts.logical_type.is_none()
                                && let Some(l) = args
                                    .framing
                                    .frame_per
                                    .and_then(|f| logical_for_frame_per(f, opts.physical_type))
                            {
                                opts.logical_type = l;
                            }
                            if !quiet && let Some(note) = crate::limits::writer_note(&opts) {
                                eprintln!("jelly: {note}");
                            }
                            let Some(out) = output.take() else {
                                continue;
                            };
                            let mut w = GroupingWriter::new(
                                opts,
                                &args.framing,
                                frame_per,
                                ns,
                                out,
                                &out_name,
                            )?;
                            w.start_input(n + 1, inputs.len());
                            writer = Some(w);
                        }
                        Event::Statement(st) => {
                            empty = None;
                            if let Some(w) = writer.as_mut() {
                                w.add(st, &at)?;
                            }
                            if let Some(p) = progress.as_mut() {
                                p.statement();
                            }
                        }
                        Event::Namespace { name: n, iri } => {
                            if let Some(w) = writer.as_mut() {
                                w.namespace(n, iri, &at)?;
                            }
                        }
                        // Graph rows are rebuilt from the statements' graphs, except
                        // for a graph with none, which only these rows can carry.
                        Event::GraphStart(g) => empty = Some(g.to_owned()),
                        Event::GraphEnd => {
                            if let (Some(g), Some(w)) = (empty.take(), writer.as_mut()) {
                                w.empty_graph(g.as_ref(), &at)?;
                            }
                        }
                    }
                }
                if let Some(w) = writer.as_mut() {
                    for (k, v) in metadata {
                        w.writer.encoder().set_frame_metadata(k, v);
                    }
                    w.end_input_frame()?;
                }
            }
            if let Some(w) = writer.as_mut() {
                w.end_input()?;
            }
        }
        Ok(())
    })();
    if let Some(p) = &progress {
        p.finish();
    }
    result?;
    match writer {
        Some(w) => w
            .finish(quiet)?
            .finish()
            .map_err(|e| CliError::io(&out_name, &e)),
        // No input had a statement or options row (a stream's first row is its
        // options, so the frames, if any, were empty).
        None => {
            let names: Vec<String> = inputs.iter().map(|p| display_name(p, true)).collect();
            let what = match frames_seen {
                0 => "empty (no frames)".to_string(),
                n => format!("without rows ({n} empty frame(s))"),
            };
            Err(CliError::invalid(match names.as_slice() {
                [one] => format!("{one}: input is {what}"),
                all => format!("every input is {what}: {}", all.join(", ")),
            }))
        }
    }
}
