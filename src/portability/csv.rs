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

/// Longest line read as a record, in characters: a longer one is malformed,
/// and no more of it than this is ever held.
pub(crate) const MAX_LINE_CHARS: usize = 1024;

/// The records of `text`, each with its 1-based line, read one at a time
/// (nothing is held but the record being read). Blank lines are skipped. A
/// record is malformed when a quote is not closed on its line, a closing
/// quote is followed by anything but a comma or the line's end, it holds a
/// NUL, or its line is longer than [`MAX_LINE_CHARS`]; reading goes on at
/// the next line.
pub(crate) fn records(text: &str) -> Records<'_> {
    Records {
        chars: text
            .strip_prefix('\u{feff}')
            .unwrap_or(text)
            .chars()
            .peekable(),
        line: 1,
    }
}

/// The iterator of [`records`].
pub(crate) struct Records<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl Records<'_> {
    /// Skips to the start of the next line.
    fn skip_line(&mut self) {
        for c in self.chars.by_ref() {
            if c == '\n' {
                self.line += 1;
                return;
            }
        }
    }
}

impl Iterator for Records<'_> {
    type Item = (usize, Record);

    fn next(&mut self) -> Option<(usize, Record)> {
        while self.chars.peek().is_some() {
            if let Some(record) = self.read_one() {
                return Some(record);
            }
        }
        None
    }
}

impl Records<'_> {
    /// Reads one line: its record, or `None` for a blank line.
    fn read_one(&mut self) -> Option<(usize, Record)> {
        let start = self.line;
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut at_field_start = true;
        let mut read = 0usize;
        loop {
            read += 1;
            if read > MAX_LINE_CHARS {
                self.skip_line();
                return Some((start, Err("the line is too long")));
            }
            match self.chars.next() {
                None => break,
                Some('\r') if self.chars.peek() == Some(&'\n') => {}
                Some('\n') => {
                    self.line += 1;
                    break;
                }
                Some(',') => {
                    fields.push(std::mem::take(&mut field));
                    at_field_start = true;
                }
                Some('"') if at_field_start => {
                    at_field_start = false;
                    loop {
                        read += 1;
                        if read > MAX_LINE_CHARS {
                            self.skip_line();
                            return Some((start, Err("the line is too long")));
                        }
                        match self.chars.next() {
                            Some('"') if self.chars.peek() == Some(&'"') => {
                                self.chars.next();
                                field.push('"');
                            }
                            Some('"') => break,
                            Some('\n') | None => {
                                self.line += 1;
                                return Some((
                                    start,
                                    Err("a quoted field is not closed on its line"),
                                ));
                            }
                            Some(c) => field.push(c),
                        }
                    }
                    if !matches!(self.chars.peek(), None | Some(',' | '\r' | '\n')) {
                        // The rest of the line belongs to the bad record.
                        self.skip_line();
                        return Some((start, Err("a closing quote is followed by more text")));
                    }
                }
                Some(c) => {
                    at_field_start = false;
                    field.push(c);
                }
            }
        }
        fields.push(field);
        if fields.len() == 1 && fields[0].trim().is_empty() {
            return None;
        }
        if fields.iter().any(|f| f.contains('\0')) {
            return Some((start, Err("a field holds a NUL")));
        }
        Some((start, Ok(fields)))
    }
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
        let read: Vec<(usize, Record)> = records(&format!("\u{feff}{text}")).collect();
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
            records(text).collect::<Vec<_>>(),
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
        let long = format!("a@x\n{}\nb@x\n", "z".repeat(MAX_LINE_CHARS + 5));
        assert_eq!(
            records(&long).collect::<Vec<_>>(),
            vec![
                (1, Ok(vec!["a@x".into()])),
                (2, Err("the line is too long")),
                (3, Ok(vec!["b@x".into()])),
            ]
        );
    }
}
