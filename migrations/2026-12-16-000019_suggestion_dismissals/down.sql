-- Back to migration 000018: no dismissed suggestions.

DROP TABLE suggestion_dismissal;
