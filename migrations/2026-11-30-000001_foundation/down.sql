DROP TABLE user_stats;
DROP TABLE outbox;
DROP TABLE follower;
DROP TABLE following;
DROP TABLE users;
