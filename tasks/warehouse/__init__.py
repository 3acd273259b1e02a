"""The warehouse I/O the tasks need: DuckDB connections and table lookup (`tables`), table names
(`names`), writability and locks (`access`), exact cells in their own types (`cells`), CHECK
constraints (`constraints`), new rows of incremental runs (`increments`), the model store
(`models`) and the scratch folders of partitioned runs (`staging`). Import from the modules;
this package imports nothing itself."""
