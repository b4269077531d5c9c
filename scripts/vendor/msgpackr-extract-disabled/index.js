// msgpackr wraps require('msgpackr-extract') in try/catch and uses its JS string decoding when it throws.
throw new Error('msgpackr native acceleration is not installed (see package.json)');
