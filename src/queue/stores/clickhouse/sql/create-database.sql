-- The store's database, created when missing.
CREATE DATABASE IF NOT EXISTS __DB__
