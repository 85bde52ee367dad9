export const packageVersion = "0.1.0";
