//! librdkafka properties passed through to every Kafka client: from a
//! properties file (`KITH_KAFKA_PROPERTIES_FILE`), then from
//! `KITH_KAFKA_<PROPERTY>` variables.

/// The librdkafka properties of `KITH_KAFKA_<PROPERTY>` variables: the
/// name after the prefix, lowercased, `_` read as `.` (`KITH_KAFKA_SASL_MECHANISMS`
/// is `sasl.mechanisms`). Sorted, so the result does not depend on the
/// environment's order.
pub fn kafka_properties(vars: impl IntoIterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut properties: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(name, value)| {
            let property = name.strip_prefix("KITH_KAFKA_")?;
            (!property.is_empty() && property != "PROPERTIES_FILE")
                .then(|| (property.to_ascii_lowercase().replace('_', "."), value))
        })
        .collect();
    properties.sort();
    properties
}

/// The properties of a Java-style properties file (`name=value` lines;
/// `#` and `!` comments).
pub(super) fn properties_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('!'))
        .filter_map(|line| {
            let (name, value) = line.split_once('=')?;
            Some((name.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_properties_pass_through_from_variables_and_a_file() {
        let vars = [
            ("KITH_KAFKA_SECURITY_PROTOCOL", "SASL_SSL"),
            ("KITH_KAFKA_SASL_MECHANISMS", "SCRAM-SHA-512"),
            ("KITH_KAFKA_PROPERTIES_FILE", "/etc/kith/kafka.properties"),
            ("KAFKA_BROKERS", "b1:9092"),
            ("KITH_FOLLOW_TOPIC", "f"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(
            kafka_properties(vars),
            vec![
                ("sasl.mechanisms".to_owned(), "SCRAM-SHA-512".to_owned()),
                ("security.protocol".to_owned(), "SASL_SSL".to_owned()),
            ]
        );
        let file = "# MSK\nssl.ca.location = /etc/ssl/ca.pem\n! old\n\nsasl.username=kith\n";
        assert_eq!(
            properties_file(file),
            vec![
                ("ssl.ca.location".to_owned(), "/etc/ssl/ca.pem".to_owned()),
                ("sasl.username".to_owned(), "kith".to_owned()),
            ]
        );
    }
}
