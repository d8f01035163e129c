-- Back to migration 000017: no import jobs.

DROP TABLE import_row;
DROP TABLE import_job;
