// The generated client of the service's page surface (types and client, package access): Generated/, made from
// openapi.yaml beside this file with openapi-generator-config.yaml by scripts/generate-shell-api.sh.
