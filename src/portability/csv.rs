//! Just enough CSV (RFC 4180) for Mastodon's account lists: fields quoted
//! when they must be, on write; quoted fields, doubled quotes, CRLF or LF
//! line ends and a leading byte-order mark, on read. A record never spans
//! lines on read (no account address holds a line break): a quote left open
//! at the end of its line makes that line malformed, and no other.

/// Appends one record (and its line end) to `out`.
pub(crate) fn write_record(out: &mut String, fields: &[&str]) {
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if field.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(field);
        }
    }
    out.push('\n');
}

/// One record read: its fields, or why it is not one.
pub(crate) type Record = Result<Vec<String>, &'static str>;

/// The records of `text`, each with its 1-based line. Blank lines are
/// skipped. A record is malformed when a quote is not closed on its line,
/// a closing quote is followed by anything but a comma or the line's end,
/// or it holds a NUL; reading goes on at the next line.
pub(crate) fn records(text: &str) -> Vec<(usize, Record)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start = line;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut at_field_start = true;
        let mut error = None;
        loop {
            match chars.next() {
                None => break,
                Some('\r') if chars.peek() == Some(&'\n') => {}
                Some('\n') => {
                    line += 1;
                    break;
                }
                Some(',') => {
                    fields.push(std::mem::take(&mut field));
                    at_field_start = true;
                }
                Some('"') if at_field_start => {
                    at_field_start = false;
                    loop {
                        match chars.next() {
                            Some('"') if chars.peek() == Some(&'"') => {
                                chars.next();
                                field.push('"');
                            }
                            Some('"') => break,
                            Some('\n') | None => {
                                error = Some("a quoted field is not closed on its line");
                                line += 1;
                                break;
                            }
                            Some(c) => field.push(c),
                        }
                    }
                    if error.is_none() && !matches!(chars.peek(), None | Some(',' | '\r' | '\n')) {
                        error = Some("a closing quote is followed by more text");
                    }
                    if error == Some("a closing quote is followed by more text") {
                        // The rest of the line belongs to the bad record.
                        for c in chars.by_ref() {
                            if c == '\n' {
                                line += 1;
                                break;
                            }
                        }
                        break;
                    }
                    if error.is_some() {
                        break;
                    }
                }
                Some(c) => {
                    at_field_start = false;
                    field.push(c);
                }
            }
        }
        if let Some(error) = error {
            out.push((start, Err(error)));
            continue;
        }
        fields.push(field);
        if fields.len() == 1 && fields[0].trim().is_empty() {
            continue;
        }
        if fields.iter().any(|f| f.contains('\0')) {
            out.push((start, Err("a field holds a NUL")));
            continue;
        }
        out.push((start, Ok(fields)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let mut text = String::new();
        write_record(&mut text, &["Account address", "Show boosts"]);
        write_record(&mut text, &["a,b@x", "say \"hi\""]);
        assert_eq!(
            text,
            "Account address,Show boosts\n\"a,b@x\",\"say \"\"hi\"\"\"\n"
        );
        let read: Vec<(usize, Record)> = records(&format!("\u{feff}{text}"));
        assert_eq!(
            read,
            vec![
                (1, Ok(vec!["Account address".into(), "Show boosts".into()])),
                (2, Ok(vec!["a,b@x".into(), "say \"hi\"".into()])),
            ]
        );
    }

    #[test]
    fn bad_records_are_told_and_reading_goes_on() {
        let text = "a@x\r\n\r\n\"b\"c,d\n  \ne@x,true\n\"open\nf@x\ng\0@x\n\"end";
        assert_eq!(
            records(text),
            vec![
                (1, Ok(vec!["a@x".into()])),
                (3, Err("a closing quote is followed by more text")),
                (5, Ok(vec!["e@x".into(), "true".into()])),
                (6, Err("a quoted field is not closed on its line")),
                (7, Ok(vec!["f@x".into()])),
                (8, Err("a field holds a NUL")),
                (9, Err("a quoted field is not closed on its line")),
            ]
        );
    }
}
